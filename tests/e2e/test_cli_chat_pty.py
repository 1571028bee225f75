"""The interactive path of `minfer --cnv`: stdin and stdout on a pseudo-terminal (line editing,
the prompt, a streamed reply, Ctrl-C stopping a reply but not the program, /exit, Ctrl-D)."""
import os

import ptyterm

MINFER = os.environ.get("MINFER_BIN", "")
MODEL = os.environ.get("MINFER_SMOLLM2", "")


def Term(*args):
    assert os.path.isfile(MODEL), f"MINFER_SMOLLM2={MODEL!r} is missing"
    return ptyterm.Term([MINFER, "--cnv", MODEL, "-t", "2", *args])


def test_prompt_reply_ctrl_c_and_exit():
    t = Term("--temp", "0", "-n", "400", "--color", "off")
    t.read_until(rb"/help lists the commands")
    t.read_until(rb"> $")
    t.send("What is the capital of Germany?\r")
    m = t.read_until(rb"Germany\?\r?\n(.+?)\r?\n> $")  # the echoed line, the reply, the next prompt
    assert b"Berlin" in m.group(1), t.out
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
