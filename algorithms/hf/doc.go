// Package hf owns the Hugging Face and PEFT file formats: what a model directory holds
// (config.json, generation_config.json, model.safetensors or the shards a
// model.safetensors.index.json names, tokenizer and template files), what an adapter directory
// holds (adapter_config.json, adapter_model.safetensors), and how Temper's float32 weights are read
// from and written to them. Tensor names and config.json's meaning come from algorithms/model
// (HFShapes, FromHFVariable/ToHFVariable, FromHFConfig/ToHFConfig, the PEFT mapping); this package
// is the one place that reads or writes those bytes, for tpu/ and activities/ alike.
//
// Contract:
//   - I/O goes through Source (open a file by name) and Sink (create one); no file system access,
//     so a local directory (FS), a checkpoint or a bucket serve alike.
//   - Inspect reads everything but the tensor data and checks it: every shard the index names
//     exists and holds exactly the tensors the index gives it, every tensor has the shape
//     config.json implies and a float dtype (F32, BF16, F16, F64), none is missing or unexpected.
//     Errors name the file and the tensor.
//   - ReadWeights streams one tensor at a time into float32 internal weights (no copy of the file,
//     no float64); OpenWeights joins shards into one such stream. The dtype the weights came in is
//     recorded (Model.DType) and written back by WriteDir unless told otherwise.
//   - WriteDir writes what transformers' save_pretrained writes: config.json (ConfigJSON: the
//     architecture from model.ToHFConfig, the original's bookkeeping fields kept), side files
//     verbatim, and the weights in one file or, above MaxShardSize (default 5 GB), in shards cut
//     as huggingface_hub cuts them, with the index. Tensors are written as the safetensors library
//     writes them, so a directory read and written back is byte-identical per dtype.
//   - ConfigFields says what Temper does with every config.json field (used, read at its default,
//     ignored with why that is harmless, or refused with the error), listing every refused field.
//   - Likes are real models' published config.json and generation_config.json (the shapes
//     `temper model init --like` makes); RandomWeights draws model.InitWeights' values on the host.
//   - Nothing panics; errors start with "hf:".
package hf
