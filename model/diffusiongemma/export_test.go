package diffusiongemma

// ConvertTensorChunked is ConvertTensor with a chosen chunk size, so that tests can
// split small tensors into many chunks.
var ConvertTensorChunked = convertTensor

// SetJoinAttention makes the fused forward join (on) or split (off) its attention call
// whatever the engine prefers.
func SetJoinAttention(m *Model, on bool) {
	m.joinAttention = -1
	if on {
		m.joinAttention = 1
	}
}
