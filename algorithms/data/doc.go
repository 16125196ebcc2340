// Package data turns examples into training batches deterministically: it encodes each example with a
// tokenizer (prompt tokens masked out of the loss, completion and EOS kept), packs encoded examples
// into fixed-length rows, and walks a dataset by a cursor {epoch, index, seed} whose order is a seeded
// permutation per epoch. Same dataset, cursor and config → the same batch, bit for bit, on any machine;
// that is what makes a retried training chunk recompute exactly what its first attempt did.
//
// Conversations are rendered as text and tokenised at once, the loss mask taken from where each id's
// bytes sit in that text: with Temper's fixed formats (Encoder.Chat, byte-level models) or, when
// Encoder.Model is set, with the model's own chat template (algorithms/chat).
//
// Packing concatenates examples in a row separated by their EOS; attention is causal over the whole row
// (no block-diagonal mask) and positions continue across examples, as in GPT-style pretraining. Rows are
// padded with PAD, which is never attended to nor trained on.
//
// ReadImagePairs reads image preference pairs (content parts with one image per side) for a vision
// reward model; its errors name the file, the line and the field. Fetching and decoding the
// images is the activity's (no I/O here).
package data
