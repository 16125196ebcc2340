# A test wrapper around the Python example agent (agent.py, copied beside it) whose agent dies on
# purpose: after its first model call it kills itself with SIGKILL on the first attempt of a
# training episode whose id matches the regular expression FAIL_FIRST (so that the attempt is
# retried in a fresh sandbox), and on every attempt of one matching FAIL_ALWAYS (so that the
# episode fails past its retries and its group is dropped). Held-out (eval) episodes never die.
# The agent runs as a child: PID 1 of the sandbox's namespace ignores a SIGKILL from inside it.
import io, json, os, re, signal, subprocess, sys
raw = sys.stdin.read()
if os.environ.get("WRAPPED") != "1":
    p = subprocess.run([sys.executable, __file__], input=raw.encode(), env=dict(os.environ, WRAPPED="1"))
    sys.exit(p.returncode if p.returncode >= 0 else 128 - p.returncode)
sys.path.insert(0, "/agent")
import agent
ep = json.loads(raw)


def matches(var):
    return os.environ.get(var, "") != "" and re.search(os.environ[var], ep["id"]) is not None


dies = ep["mode"] == "train" and ((matches("FAIL_FIRST") and ep["attempt"] == 1) or matches("FAIL_ALWAYS"))
chat = agent.chat


def dying_chat(*args):
    out = chat(*args)
    if dies:
        os.kill(os.getpid(), signal.SIGKILL)
    return out


agent.chat = dying_chat
sys.stdin = io.StringIO(raw)
agent.main()
