"""A program on a pseudo-terminal (stdin, stdout and stderr), for the e2e tests of what only
shows on a terminal: line editing, colors, progress lines, Ctrl-C as the terminal sends it.

    t = Term(["/path/to/minfer", "--cnv", model])
    t.read_until(rb"> $")           # a regex on everything read so far
    t.send("Hello\\r")
    assert t.wait() == 0            # the exit code (-N for a signal)
"""
import os
import pty
import re
import select
import signal
import time


class Term:
    def __init__(self, argv):
        assert os.path.isfile(argv[0]), f"{argv[0]!r} is not built"
        self.pid, self.fd = pty.fork()
        if self.pid == 0:
            os.environ["TERM"] = "xterm"
            os.execv(argv[0], argv)
        self.out = b""

    def read_until(self, pattern, timeout=60):
        """Reads until `pattern` (a regex on all the bytes read) matches."""
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
        raise AssertionError("the program did not exit:\n" + self.out.decode(errors="replace"))
