"""The interactive path of `minfer --cnv`: stdin and stdout on a pseudo-terminal (line editing,
the prompt, a streamed reply, Ctrl-C stopping a reply but not the program, /exit, Ctrl-D)."""
import os
import pty
import re
import select
import signal
import time

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")


class Term:
    def __init__(self, *args):
        assert os.path.isfile(MINFER), f"MINFER_BIN={MINFER!r} is not built"
        assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing"
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "xterm"
            os.execv(MINFER, [MINFER, "--cnv", MODEL, "-t", "2", *args])
        self.out = b""

    def read_until(self, pattern, timeout=60):
        """Reads until `pattern` (a regex on the bytes read since `start`) matches."""
        deadline = time.time() + timeout
        rx = re.compile(pattern)
        while time.time() < deadline:
            m = rx.search(self.out)
            if m:
                return m
            r, _, _ = select.select([self.fd], [], [], 0.2)
            if r:
                try:
                    data = os.read(self.fd, 4096)
                except OSError:
                    break
                if not data:
                    break
                self.out += data
        raise AssertionError(f"{pattern!r} not seen; output so far:\n{self.out.decode(errors='replace')}")

    def send(self, text):
        # The prompt being on screen does not mean the line editor has set the terminal up
        # yet (it flushes input typed before that): give it a moment, so a loaded machine
        # does not turn the test into a race.
        time.sleep(0.3)
        os.write(self.fd, text.encode())

    def wait(self, timeout=30):
        deadline = time.time() + timeout
        while time.time() < deadline:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                return os.waitstatus_to_exitcode(status)
            try:
                r, _, _ = select.select([self.fd], [], [], 0.2)
                if r:
                    self.out += os.read(self.fd, 4096)
            except OSError:
                time.sleep(0.1)
        os.kill(self.pid, signal.SIGKILL)
        raise AssertionError("minfer did not exit:\n" + self.out.decode(errors="replace"))


def test_prompt_reply_ctrl_c_and_exit():
    t = Term("--temp", "0", "-n", "400", "--color", "off")
    t.read_until(rb"/help lists the commands")
    t.read_until(rb"> $")
    t.send("What is the capital of France?\r")
    m = t.read_until(rb"France\?\r?\n(.+?)\r?\n> $")  # the echoed line, the reply, the next prompt
    assert b"Paris" in m.group(1), t.out
    # A long reply, stopped by Ctrl-C: the program stays and prompts again.
    t.send("Write a very long story about a dragon, with many chapters.\r")
    t.read_until(rb"many chapters\.\r?\n(.|\n){100}")  # a part of the reply has streamed
    t.send("\x03")
    t.read_until(rb"\[interrupted\]")
    t.read_until(rb"> $")
    t.send("/stats\r")  # the cut reply is kept in the history
    t.read_until(rb"\[stats\] 4 messages(.|\n)*stop: cancelled(.|\n)*> $")
    t.send("/exit\r")
    assert t.wait() == 0


def test_history_ctrl_c_at_the_prompt_ctrl_d_and_colors():
    t = Term("--temp", "0", "-n", "8")  # --color auto: on, stdout is a terminal
    t.read_until(rb"\x1b\[1;32m>\x1b\[0m $")
    # Keys are sent once the prompt is back (libedit may flush input typed before it).
    prompt = rb"\x1b\[1;32m>\x1b\[0m $"
    t.send("/help\r")
    t.read_until(rb"/regen(.|\n)*" + prompt)
    t.send("\x1b[A\r")  # up arrow: the history has /help
    t.read_until(rb"/regen(.|\n)*/regen(.|\n)*" + prompt)
    t.send("abc\x03")  # Ctrl-C at the prompt drops the line, the program stays
    t.read_until(rb"\(Ctrl-C stops a reply; /exit or Ctrl-D quits\)(.|\n)*" + prompt)
    t.send("/stats\r")
    t.read_until(rb"\[stats\] 0 messages(.|\n)*" + prompt)
    t.send("\x04")
    assert t.wait() == 0
