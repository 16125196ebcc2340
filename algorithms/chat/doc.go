// Package chat renders a model's own chat template (tokenizer_config.json's chat_template, or
// chat_template.jinja) as Hugging Face's apply_chat_template does, byte for byte, and turns a
// conversation into training ids whose loss mask comes from offsets in the rendered text.
//
// Rendering is a small interpreter of the Jinja subset chat templates use, configured as
// transformers configures Jinja2: trim_blocks, lstrip_blocks, loop controls, {% generation %},
// a tojson that is Python's json.dumps (ensure_ascii false, Python separators, key order kept),
// raise_exception and strftime_now (from Options.Now, never the clock). Variables: messages,
// tools, documents, add_generation_prompt, the config's *_token strings and any Options.Kwargs
// (enable_thinking, ...). A construct outside the subset (a filter, test, tag or method it does
// not know) is an error naming it, never a silent difference. Values follow Python: dicts keep
// their key order, None prints as "None", "a" + None is an error.
//
// Contract: Render never panics; a template's raise_exception, or any evaluation error, is a
// *TemplateError naming the message being rendered when there was one. Templates are immutable
// after Parse/Load and safe for concurrent use. No I/O: callers pass file contents.
//
// Golden renders of the real Qwen3, Llama 3.1 and Gemma 3 templates come from
// scripts/goldens/chat (see docs/chat-templates.md).
package chat
