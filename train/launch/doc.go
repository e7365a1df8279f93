// Package launch is how the ranks of a distributed training run start. In a rank, Detect
// reads how it was started — MLX_RANK and MLX_HOSTFILE for the ring, MLX_RANK,
// MLX_WORLD_SIZE, NCCL_HOST_IP and NCCL_PORT for NCCL (as mlx.launch and train --launch
// set them), or mpirun's variables — and the world it belongs to. Local is train
// --launch: it starts N ranks of a program on this machine as mlx.launch -n N does (for
// NCCL, one GPU per rank), passes their output through (the other ranks' stderr
// prefixed), and forwards signals so that the ranks stop together.
package launch
