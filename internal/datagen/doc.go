// Package datagen writes datasets for `temper data`: a built-in task's examples as JSONL (as
// prompt/completion, as pretraining text, packed, as chats, or as an agentic task's tool-use
// demonstrations), its preference pairs (synthetic mistakes, or a checkpoint's own samples verified and
// paired, with the code a preference phase's data.from_model runs), and held-out sets beside them; and
// checks a JSONL file of examples.
//
// Same options and seed, same bytes. Bad options and unreadable input are *usage.Error naming the flag;
// output goes to Options.Out, or Options.Stdout when it is empty.
package datagen
