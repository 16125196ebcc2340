// Package safetensors reads and writes the Hugging Face safetensors format on
// io.Reader / io.Writer / io.ReaderAt, with no file-system access.
//
// Layout (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON header (padded with spaces so the data
// starts 8-byte aligned), then the data buffer. The header maps each tensor
// name to {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative
// to the data buffer) plus an optional "__metadata__" string map.
//
// Contract:
//   - Write validates every tensor first, then streams the header and each
//     tensor's bytes in name order; it never builds the file in memory.
//   - Read and ReadHeader reject headers over MaxHeaderSize, invalid JSON,
//     duplicate names, unknown dtypes, offsets that are not contiguous from 0,
//     and data sizes that do not equal prod(shape)*dtype size. A short data
//     buffer is reported with the name of the first tensor it cuts.
//   - Data is little-endian, as in the format. ToFloat32 widens F64/F32/F16/BF16;
//     FromFloat32 narrows with round-to-nearest-even.
//   - Nothing panics; errors start with "safetensors:".
package safetensors
