// Package imageproc turns image bytes into the pixel values a SigLIP vision tower reads, the way
// transformers' SiglipImageProcessor (the PIL-based "slow" processor) does: decode (PNG, JPEG),
// convert to RGB (alpha dropped, as PIL's convert("RGB")), resize with Pillow's resampling
// (bicubic by default; the same fixed-point arithmetic, so PNG inputs give the same bytes as
// Pillow 9.4), rescale (×rescale_factor in float64, then float32), normalise ((x−mean)/std in
// float32), channels first. It also parses the image references of data files (file://, gs://,
// data: URIs) and the content parts of messages, and derives a content-addressed cache key.
//
// Contract:
//   - Bytes in, values out: no file system, no network. Fetching file:// and gs:// objects is the
//     caller's (an activity's) business; ParseRef validates the reference and decodes data: URIs.
//   - Untrusted input never panics and never allocates by what a header claims before the header
//     is checked: the format is sniffed from the magic bytes (PNG, JPEG; anything else is refused
//     by name), the dimensions are read from the header and refused above Limits.MaxPixels before
//     any pixel is decoded, and inputs over Limits.MaxBytes are refused unread. Fuzzed.
//   - Errors start with "imageproc:", name the operation and the offending value, and list the
//     allowed values where there is a list; content-part errors name the field path
//     (messages[1].content[0].image) so a loader can prefix file and line.
//   - Preprocess(cfg) is a pure function of (bytes, cfg): CacheKey(bytes, cfg) names its output.
//
// Deviations from transformers, all deliberate: every image is converted to RGB whether or not
// do_convert_rgb is set (on RGB input that is what transformers does; on other modes transformers
// would fail or keep extra channels); EXIF orientation is not applied (the processor does not
// apply it either, only transformers.image_utils.load_image does); JPEG is decoded by Go's
// image/jpeg, whose IDCT and chroma upsampling differ from libjpeg's (measured differences are in
// docs/vision.md); 16-bit grayscale PNGs keep their high byte where Pillow 9.4 clips them to 255.
//
// Standard library only.
package imageproc
