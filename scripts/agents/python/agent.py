#!/usr/bin/env python3
"""A tool-using agent for Temper's agent gateway, standard library only (urllib, json).

Temper starts it once per episode in the code sandbox, with the episode on standard input as JSON
({"prompt", "task", "reference", "seed", "temperature", "max_tokens", "max_calls", "model", "mode"})
and OPENAI_BASE_URL pointing at the episode's model endpoint (the policy being trained). It asks the
model the question; when the model writes a calculator call, <tool>{"name": "calc", "arguments":
{"expr": "48213*9071"}}</tool>, the agent computes the expression with its own calculator and sends
the result back as a tool message; the model's first answer without a call is printed on standard
output, which the phase's verifiers score.

It passes the episode's seed (plus the call's index) as each request's seed, so that a replayed
episode gets the same tokens. With TEMPER_AGENT_LOG=- it prints every response it got, one JSON
line each, after the answer (the verifiers read the first line; Temper's tests compare what the
agent was served with what was trained on).
"""

import json
import os
import sys
import urllib.error
import urllib.request

MAX_TURNS = 4


def calc(expr):
    """Exact integer arithmetic on + - * and parentheses: the agent's own calculator."""
    tokens, i = [], 0
    while i < len(expr):
        c = expr[i]
        if c.isspace():
            i += 1
        elif c.isdigit():
            j = i
            while j < len(expr) and expr[j].isdigit():
                j += 1
            tokens.append(int(expr[i:j]))
            i = j
        elif c in "+-*()":
            tokens.append(c)
            i += 1
        else:
            raise ValueError("unexpected %r" % c)
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else None

    def take():
        pos[0] += 1
        return tokens[pos[0] - 1]

    def atom():
        t = take() if peek() is not None else None
        if t == "(":
            v = expr_()
            if take() != ")":
                raise ValueError("missing )")
            return v
        if t == "-":
            return -atom()
        if isinstance(t, int):
            return t
        raise ValueError("unexpected %r" % (t,))

    def term():
        v = atom()
        while peek() == "*":
            take()
            v *= atom()
        return v

    def expr_():
        v = term()
        while peek() in ("+", "-"):
            v = v + term() if take() == "+" else v - term()
        return v

    v = expr_()
    if pos[0] != len(tokens):
        raise ValueError("trailing input")
    return str(v)


RESPONSES = []


def chat(base, episode, messages, k):
    body = {
        "model": episode["model"],
        "messages": messages,
        "max_tokens": episode["max_tokens"],
        "temperature": episode["temperature"],
        "seed": episode["seed"] + k,
        "stop": ["</tool>"],
        "logprobs": True,
    }
    req = urllib.request.Request(base + "/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + os.environ.get("OPENAI_API_KEY", "")})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            out = json.load(resp)
    except urllib.error.HTTPError as e:
        sys.exit("model call %d: HTTP %d: %s" % (k, e.code, e.read().decode(errors="replace")))
    RESPONSES.append(out)
    return out["choices"][0]


def main():
    episode = json.load(sys.stdin)
    base = os.environ["OPENAI_BASE_URL"].rstrip("/")
    messages = [{"role": "user", "content": episode["prompt"]}]
    answer = ""
    for k in range(min(MAX_TURNS, episode.get("max_calls", MAX_TURNS))):
        choice = chat(base, episode, messages, k)
        text = choice["message"]["content"] or ""
        start = text.find("<tool>")
        if start < 0 or choice["finish_reason"] != "stop":
            answer = text  # an answer (or a call cut short by max_tokens: the episode ends)
            break
        answer = text[:start]
        try:
            call = json.loads(text[start + len("<tool>"):])
            if call.get("name") != "calc":
                raise ValueError("unknown tool %r" % call.get("name"))
            args = call["arguments"]
            result = calc(args["expr"])
        except (ValueError, KeyError, TypeError) as e:
            answer = "error: " + str(e)
            break
        # The call goes back as the model wrote it (compact JSON, as the chat template renders a
        # call), so the next prompt extends this one and the episode stays one trajectory.
        messages.append({"role": "assistant", "content": text[:start], "tool_calls": [{
            "id": "call_%d" % k, "type": "function",
            "function": {"name": "calc", "arguments": json.dumps(args, separators=(",", ":"))}}]})
        messages.append({"role": "tool", "tool_call_id": "call_%d" % k, "content": result})
    print(answer.strip().replace("\n", " "))
    if os.environ.get("TEMPER_AGENT_LOG") == "-":
        for r in RESPONSES:
            print(json.dumps(r))


if __name__ == "__main__":
    main()
