//go:build mlx

package engines

import _ "github.com/dgtune/dgtune/mx/mlxeng" // the MLX engine, with -tags mlx
