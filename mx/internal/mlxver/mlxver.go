// Package mlxver parses MLX release versions and names the releases whose algorithms
// the go engine reproduces, so that it can follow the MLX it is compared with.
package mlxver

import (
	"fmt"
	"regexp"
	"strconv"
)

// Version is an MLX release, major.minor.patch.
type Version struct{ Major, Minor, Patch int }

// The releases dgtune is tested against: the mlx engine builds with mlx-c from Oldest
// on, and the go engine reproduces the random draws of every release in between.
var (
	Oldest = Version{0, 31, 2}
	Newest = Version{0, 32, 1}
)

// V0_32_1 is where MLX's random numbers changed (ml-explore/mlx #4012, #4177):
// randint floors and clamps to [low, high), and categorical sampling of a single
// distribution inverts its CDF instead of taking the Gumbel-max.
var V0_32_1 = Version{0, 32, 1}

// leading matches what mlx::core::version() returns: "0.32.1", or a development build's
// "0.32.1.dev20260822+3a62199".
var leading = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)`)

// Parse reads the release from a version string.
func Parse(s string) (Version, error) {
	m := leading.FindStringSubmatch(s)
	if m == nil {
		return Version{}, fmt.Errorf("mlxver: %q is not an MLX version (want major.minor.patch)", s)
	}
	var v Version
	for i, p := range []*int{&v.Major, &v.Minor, &v.Patch} {
		n, err := strconv.Atoi(m[i+1])
		if err != nil {
			return Version{}, fmt.Errorf("mlxver: %q: %w", s, err)
		}
		*p = n
	}
	return v, nil
}

// AtLeast reports whether v is o or later.
func (v Version) AtLeast(o Version) bool {
	if v.Major != o.Major {
		return v.Major > o.Major
	}
	if v.Minor != o.Minor {
		return v.Minor > o.Minor
	}
	return v.Patch >= o.Patch
}

func (v Version) String() string { return fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch) }
