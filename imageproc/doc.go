// Package imageproc turns image files into the pixel arrays DiffusionGemma's vision tower
// reads (diffusiongemma.md §3.9): decode (PNG, JPEG, GIF; standard library only), flatten
// transparency onto white, resize preserving the aspect ratio so that both sides are
// multiples of patch·pooling (48) and the image has at most MaxSoftTokens·pooling² patches
// (2520), rescale by 1/255 with no mean/std normalisation, and lay the result out
// channel-first as float32 [3, H, W]. The image then stands for
// n_soft = (H/patch)·(W/patch)/pooling² soft tokens (768×768 → 256).
//
// The sizing rule is the Gemma 4 image processor's, computed in the same float64 order so
// that sizes agree exactly. The resampler is bicubic (Keys, a = −0.5) with the kernel
// widened by the scale factor when shrinking, as PIL's BICUBIC filter does, and rounds to
// 8-bit levels after each pass as PIL's uint8 path does; it is written here because the
// standard library has no resampling filter.
//
// A [Source] holds an image file's bytes after a full trial decode, so a data set can
// reject truncated, empty, oversized or unsupported files when it is read and still keep
// only the compressed bytes in memory until a forward pass needs the pixels.
package imageproc
