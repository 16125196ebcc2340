// Package modeldir reads and writes Hugging Face model directories for `temper model`: Inspect reports
// what Temper makes of one (family, sizes, weights and their dtypes, attention pattern, tokenizer, chat
// template and tool-call style, generation config, and the fate of every config.json field: used,
// defaulted, ignored or refused), without reading tensor data; Init writes a random-initialised model of
// a real shape (a directory's config.json or a known shape, with overrides), with its tokenizer and chat
// template, that the one loader loads.
//
// Inspect fails only on an unreadable config.json: what loading would refuse is the report's Refused,
// so that the report can say why. Bad options of Init are *usage.Error naming the flag. Paths may be
// file:// URIs.
package modeldir
