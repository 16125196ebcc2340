// Package layoutrender draws a layout completion — JSON boxes with a role, a position and size,
// a colour and optional text, the format the "layout" verifier checks — into a fixed-size RGBA
// image, so that a multimodal critic can look at what a layout-writing policy produced.
//
// Contract:
//   - Deterministic: the same completion and Options give the same pixels, and RenderPNG the same
//     bytes (integer compositing from image/draw, text from the embedded Go fonts rasterised by
//     golang.org/x/image, a fixed PNG encoder setting). The golden hashes in the tests hold for a
//     given Go toolchain on amd64; architectures whose compilers fuse multiply-adds (arm64) may
//     round glyph edges differently.
//   - The layout is read by verify.ParseLayout, the layout verifier's own parser: a malformed
//     completion is a *LayoutError whose Feedback is exactly the verifier's feedback. Attributes
//     the verifier ignores are checked here (role, color, text_color, text), and a bad one is a
//     *LayoutError naming the box, the field and the allowed values. Boxes whose geometry the
//     verifier counts as invalid (missing or non-finite x/y/w/h, w or h <= 0) are not drawn and
//     are listed in Result.Skipped; boxes are clipped to the canvas.
//   - Untrusted input never panics (fuzzed) and its cost is bounded: at most 1024 boxes (the
//     verifier's bound), 300 characters of text per box and 4000 in all, images up to 1024×1024.
//   - Errors for bad Options are plain errors naming the field; errors for the completion are
//     *LayoutError, which callers turn into feedback rather than failing the run.
//
// Standard library, golang.org/x/image (fonts, rasteriser) and algorithms/verify.
package layoutrender
