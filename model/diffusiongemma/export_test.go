package diffusiongemma

// ConvertTensorChunked is ConvertTensor with a chosen chunk size, so that tests can
// split small tensors into many chunks.
var ConvertTensorChunked = convertTensor
