package main

import (
	"os"
	"strings"
	"testing"
)

// TestCommandTable: every command lives in its own file, cmd_NAME.go, and names each of its
// subcommands in its usage, so that the table of commands can be read off the directory and a
// document naming `temper NAME SUB` can be checked against commands[NAME].subs.
func TestCommandTable(t *testing.T) {
	if len(commands) < 15 {
		t.Fatalf("%d commands registered: is registration broken?", len(commands))
	}
	for _, name := range commandNames() {
		c := commands[name]
		src, err := os.ReadFile("cmd_" + name + ".go")
		if err != nil {
			t.Errorf("command %s: %v (each command is registered from cmd_NAME.go)", name, err)
		} else if !strings.Contains(string(src), `name: "`+name+`"`) {
			t.Errorf("cmd_%s.go does not register command %s", name, name)
		}
		for _, sub := range c.subs {
			if !strings.Contains(c.usage, sub) {
				t.Errorf("command %s: usage %q does not name subcommand %s", name, c.usage, sub)
			}
		}
	}
}

// TestUnknownSubcommand: a subcommand a command does not take is refused with an error that names
// the ones it takes.
func TestUnknownSubcommand(t *testing.T) {
	n := 0
	for _, name := range commandNames() {
		c := commands[name]
		if len(c.subs) == 0 {
			continue
		}
		n++
		out, err := cli(t, name, "nosuchsub")
		if err == nil {
			t.Errorf("temper %s nosuchsub: no error (output %q)", name, out)
			continue
		}
		for _, sub := range c.subs {
			if !strings.Contains(err.Error(), sub) {
				t.Errorf("temper %s nosuchsub: %q does not name subcommand %s", name, err, sub)
			}
		}
	}
	if n < 5 {
		t.Errorf("%d commands with subcommands, want bench, ckpt, config, data and lora", n)
	}
}
