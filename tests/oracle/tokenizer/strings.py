"""Deterministic, varied test strings for tokenizer comparisons (and the benchmark's text).

    from strings import test_strings, mixed_text
    cases = test_strings(seed=1234, special=["<|im_start|>", "<|im_end|>"])   # list of str
    text = mixed_text(1 << 20, seed=7)                                         # ~1 MB str

Kinds: multilingual prose, code, whitespace runs, numbers, emoji, contractions, special-token
text (whole, partial, adjacent), random assigned code points, random ASCII, combining marks,
and random concatenations of all of those. REAL_TEXT / real_text(): written-out documents
(prose, code, whitespace, numbers, Unicode, leading spaces, a chat with Gemma's turn markers).
"""
import random
import unicodedata

PROSE = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world! How are you doing today?",
    "I'm sure they'll say we've done it; you'd agree, wouldn't you? It's John's.",
    "IT'S DONE. WE'LL SEE. THEY'RE HERE. I'D RATHER NOT. YOU'VE WON.",
    "Portez ce vieux whisky au juge blond qui fume. L'été dernier, j'ai vu ça.",
    "Zwölf Boxkämpfer jagen Viktor quer über den großen Sylter Deich.",
    "El pingüino Wenceslao hizo kilómetros bajo exhaustiva lluvia y frío, añoraba a su querido cachorro.",
    "Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "Τάχιστη αλώπηξ βαφής ψημένη γη, δρασκελίζει υπέρ νωθρού κυνός.",
    "أبجد هوز حطي كلمن سعفص قرشت ثخذ ضظغ. مرحبا بالعالم!",
    "עטלף אבק נס דרך מזגן שהתפוצץ כי חם.",
    "ऋषियों को सताने वाले दुष्ट राक्षसों के राजा रावण का सर्वनाश करने वाले विष्णुवतार भगवान श्रीराम।",
    "我能吞下玻璃而不伤身体。今天天气很好，我们去公园散步吧！",
    "いろはにほへと ちりぬるを わかよたれそ つねならむ。東京は日本の首都です。",
    "다람쥐 헌 쳇바퀴에 타고파. 안녕하세요, 만나서 반갑습니다!",
    "เป็นมนุษย์สุดประเสริฐเลิศคุณค่า กว่าบรรดาฝูงสัตว์เดรัจฉาน",
    "Tiếng Việt có dấu: Tôi yêu tiếng nước tôi từ khi mới ra đời.",
    "Pijamalı hasta yağız şoföre çabucak güvendi. İstanbul'da ılık bir gün.",
    "Stróż pchnął kość w quiz gędźb vel fax myjń. Žluťoučký kůň úpěl ďábelské ódy.",
    "ქართული ენა ძალიან ლამაზია. Հայերեն լեզու։ ᐊᐃᓐᓇ ᓄᓇᕗᑦ.",
    "Ελληνικά και English mixed μαζί with 中文 and русский текст.",
    "naïve café résumé coöperate Ångström façade piñata jalapeño",
]
CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\nint main(void) {\n\tprintf(\"hello, %s!\\n\", \"world\");\n\treturn 0;\n}\n",
    "for (let i = 0; i < arr.length; ++i) { sum += arr[i] ** 2; } // O(n)",
    "{\"name\": \"minfer\", \"version\": [0, 1, 0], \"ok\": true, \"ratio\": 3.14e-5}",
    "<html>\n  <body class=\"main\">\n    <p>Hi &amp; bye</p>\n  </body>\n</html>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "$ grep -rn \"NOTE\" src/ | awk -F: '{print $1}' | sort -u > /tmp/notes.txt && echo $?",
    "    \n\n\t\tif (x != y && y >= z) { return x->next; }\r\n",
    "std::vector<std::pair<int, std::string>> v{{1, \"a\"}, {2, \"b\"}};",
    "x = [i*i for i in range(10) if i % 2 == 0]  # squares\nprint(f\"{x!r:>20}\")",
    "fn main() -> Result<(), Box<dyn Error>> { let s: &str = \"ok\"; Ok(()) }",
    "a+=1;b-=2;c*=3;d/=4;e%=5;f<<=6;g>>=7;h&=8;i|=9;j^=10;k=~l;m=!n;",
]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "🇯🇵", "❤️", "🔥", "🚀✨", "🤖", "🏳️‍🌈", "👩🏻‍💻", "☕", "🦀", "🐍", "🎉🎉🎉", "1️⃣", "©️", "™"]
WS = [" ", "  ", "   ", "\t", "\n", "\n\n", "\r\n", " \n", "\n ", " \t ", "\u00a0", "\u3000", "\u2009", "\u2028", "\x0b", "\x0c", "\u0085", "        "]
NUMBERS = ["0", "7", "42", "123", "1234", "12345", "1234567890", "3.14159", "-0.5", "1e-10", "1,000,000",
           "2024-06-01", "12:34:56", "+1 (555) 010-9999", "٣٤٥", "१२३", "①②③", "½", "²³", "Ⅻ", "０１２３"]
CONTRACTIONS = ["don't", "I'm", "you're", "we've", "she'll", "he'd", "it's", "DON'T", "I'M", "We'Ve",
                "'s", "'t", "'re", "'ll", "'d", "'m", "''", "'", "rock'n'roll", "o'clock"]


def random_codepoint(rng):
    """A random assigned, non-surrogate, non-private code point (Python's Unicode tables)."""
    while True:
        r = rng.random()
        if r < 0.5:
            cp = rng.randrange(0x20, 0x3000)
        elif r < 0.8:
            cp = rng.randrange(0x3000, 0x10000)
        else:
            cp = rng.randrange(0x10000, 0x30000)
        cat = unicodedata.category(chr(cp))
        if cat not in ("Cn", "Cs", "Co"):
            return chr(cp)


def random_piece(rng, special):
    k = rng.randrange(12)
    if k == 0:
        return rng.choice(PROSE)
    if k == 1:
        return rng.choice(CODE)
    if k == 2:
        return "".join(rng.choice(WS) for _ in range(rng.randrange(1, 4)))
    if k == 3:
        return rng.choice(NUMBERS)
    if k == 4:
        return rng.choice(EMOJI)
    if k == 5:
        return rng.choice(CONTRACTIONS)
    if k == 6 and special:
        s = rng.choice(special)
        return s if rng.random() < 0.8 else s[: rng.randrange(1, len(s))]
    if k == 7:
        return "".join(random_codepoint(rng) for _ in range(rng.randrange(1, 8)))
    if k == 8:
        return "".join(chr(rng.randrange(0x20, 0x7F)) for _ in range(rng.randrange(1, 12)))
    if k == 9:  # combining marks, decomposed accents
        return rng.choice(["e\u0301", "a\u0308\u0304", "n\u0303o", "\u0915\u094d\u0937", "\u0301x", "Z\u0351\u036b\u0343"])
    if k == 10:
        w = rng.choice(PROSE).split()
        return rng.choice(w)
    return rng.choice(["", " ", "\n"])


def test_strings(seed=1234, special=()):
    rng = random.Random(seed)
    special = list(special)
    out = []
    out += PROSE + CODE + EMOJI + WS + NUMBERS + CONTRACTIONS
    out += ["".join(rng.choice(WS) for _ in range(n)) for n in range(1, 40)]
    out += [" " * n + "x" for n in range(1, 12)] + ["x" + " " * n for n in range(1, 12)]
    out += ["\n" * n + "a" + "\n" * n for n in range(1, 6)]
    out += ["".join(str(rng.randrange(10)) for _ in range(n)) for n in range(1, 30)]
    for s in special:
        out += [s, s + s, "a" + s + "b", " " + s + " ", s[:-1], s + "\n" + s, "x" + s[: len(s) // 2]]
    out += ["".join(random_codepoint(rng) for _ in range(rng.randrange(1, 30))) for _ in range(200)]
    # small alphabets of the characters the splitting rules care about, densely mixed
    tricky = [" ", " ", "  ", "\n", "\r", "\t", "a", "Z", "1", "9", "'", "s", "LL", ".", "!", "\u00a0", "é",
              "中", "😀", "\u0301", "<", "|", ">", "$", "`", "_", "\u3000", "٣", "ǅ", "ſ"]
    tricky += [s for s in special[:4]]
    out += ["".join(rng.choice(tricky) for _ in range(rng.randrange(1, 25))) for _ in range(300)]
    while len(out) < 1500:
        out.append("".join(random_piece(rng, special) for _ in range(rng.randrange(1, 10))))
    return [s for s in out if s != ""] + [""]


def mixed_text(n_bytes, seed=7):
    """About n_bytes of UTF-8: prose in many scripts, code, numbers, emoji, whitespace."""
    rng = random.Random(seed)
    parts, size = [], 0
    while size < n_bytes:
        k = rng.random()
        if k < 0.45:
            s = rng.choice(PROSE) + rng.choice([" ", "\n", "  ", "\n\n"])
        elif k < 0.75:
            s = rng.choice(CODE)
        elif k < 0.85:
            s = " ".join(rng.choice(NUMBERS) for _ in range(rng.randrange(1, 6))) + " "
        elif k < 0.93:
            s = rng.choice(EMOJI) + rng.choice(CONTRACTIONS) + " "
        else:
            s = rng.choice(WS) + "".join(random_codepoint(rng) for _ in range(rng.randrange(1, 6)))
        parts.append(s)
        size += len(s.encode("utf-8"))
    return "".join(parts)


# Real text, written out rather than generated: documents of the kinds a prompt is made of
# (several KB in all). The chat document uses Gemma's turn markers, which are control tokens
# of its vocabulary and plain text elsewhere.
REAL_TEXT = [
    # English prose
    """The history of the printing press is, in many ways, the history of the modern world. When
Johannes Gutenberg combined movable metal type, oil-based ink and a wooden screw press around
1440, he did not merely speed up the copying of books; he changed who could own them, what they
cost, and how quickly an idea could travel from one city to the next. Within fifty years, presses
were running in more than 270 towns across Europe, and an estimated 20 million volumes had been
printed. Scholars call these early books "incunabula" (from the Latin for "cradle").

Critics were not hard to find. Some worried that cheap pamphlets would spread error as fast as
truth -- a complaint that sounds familiar today. Others, like the abbot Johannes Trithemius,
argued that hand-copying was itself a spiritual exercise, and that parchment would outlast paper
by centuries. (He was right about the parchment, if about little else.) Yet the press won: by
1600 the price of a book had fallen to a fraction of what it had been, literacy was rising, and
the Reformation, the Scientific Revolution and the newspaper had all been made possible.

Isn't it remarkable that a machine built from a wine press could do all that? We'd like to think
our own inventions will matter as much; they'll probably matter in ways we can't yet imagine.
""",
    # Python with 4-space indentation, blank lines, a docstring, f-strings
    '''import json
import os
from dataclasses import dataclass, field


@dataclass
class Config:
    """Settings read from a JSON file; unknown keys are rejected."""

    model: str = "gemma-3-270m"
    threads: int = 2
    temperature: float = 0.7
    stop: list[str] = field(default_factory=lambda: ["<end_of_turn>"])

    @classmethod
    def load(cls, path: str) -> "Config":
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        unknown = set(data) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown keys in {path!r}: {sorted(unknown)}")
        return cls(**data)


def main() -> int:
    cfg = Config.load(os.environ.get("CONFIG", "config.json"))
    for i, word in enumerate(cfg.stop):
        print(f"{i:>3}: {word!r:<20} len={len(word)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
''',
    # C and a Makefile: tab indentation, tabs inside lines, a trailing tab
    """#include <stdio.h>
#include <stdlib.h>

/* Sum of the first n squares, with overflow checked. */
static int sum_squares(int n, long long *out) {
\tlong long s = 0;
\tfor (int i = 1; i <= n; ++i) {
\t\tif (s > (1LL << 62)) {
\t\t\treturn -1;\t/* overflow */
\t\t}
\t\ts += (long long)i * i;
\t}
\t*out = s;
\treturn 0;
}

CFLAGS\t= -O2 -Wall -Wextra
all: sum
sum: sum.o
\t$(CC) $(CFLAGS) -o $@ $^\t
clean:
\trm -f sum sum.o
""",
    # whitespace: runs of spaces, spaces before newlines, blank lines, CRLF, mixed tabs
    "Columns:  a    b        c                d\n"
    "trailing spaces   \n"
    "\n\n\n"
    "after three blank lines\n\n\n\n\n\n\n\n"
    "eight newlines above; now forty spaces:" + " " * 40 + "end\n"
    "\t\tindented by two tabs\n"
    "    \tspaces then a tab\n"
    "\t    a tab then spaces\n"
    "windows line\r\nanother\r\n\r\n"
    "a" + " " * 33 + "b" + "\n" * 33 + "c\n"
    " \n  \n   \n    \n"
    "single space line: \n"
    "     \n",
    # numbers
    """Invoice #2024-0117, issued 2024-01-17 at 09:45:30 UTC.
Qty  Item                     Unit price    Total
  3  USB-C cable (2 m)           $12.99      $38.97
 12  AA batteries                 $0.75       $9.00
  1  Monitor 27" 2560x1440       $329.00     $329.00
Subtotal: $376.97; tax 8.25% = $31.10; total $408.07.
Call +1 (555) 010-9999 or 0800 123 4567. Pi is 3.14159265358979, e is 2.718281828,
Avogadro's number is 6.02214076e23, and 0xDEADBEEF == 3735928559. Version 1.2.10-rc3,
build 20240117.3; 1,000,000 vs 1.000.000 vs 1 000 000; 50% off; -40 °C = -40 °F; 1/3 ≈ 0.333.
""",
    # Unicode: CJK, accents, emoji, RTL
    """日本語の文章です。東京は日本の首都で、人口は約1400万人です。今日はいい天気ですね！
中文：人工智能正在改变我们的生活方式。我们今天去图书馆看书，然后吃饭。
한국어: 서울은 대한민국의 수도입니다. 오늘 날씨가 정말 좋네요.
Français : « Où est la bibliothèque ? » demanda-t-elle. Ça coûte 12,50 € — c'est très cher !
Deutsch: Die Straße führt über die Brücke; Größe, Maß und Fußgänger.
Tiếng Việt: Xin chào, tôi tên là Nguyễn. Español: ¿Dónde está el niño? ¡Qué día más bonito!
Emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️‍🔥 🚀✨ 🤖🧠 (and text between them) 🎉🎉🎉
العربية: مرحبا بالعالم! كيف حالك اليوم؟ الرقم ١٢٣٤٥.
עברית: שלום עולם, מה שלומך? המספר 42.
Mixed direction: The word שלום means "peace", and مرحبا means "hello".
Greek: Καλημέρα κόσμε. Russian: Привет, мир! Hindi: नमस्ते दुनिया। Thai: สวัสดีชาวโลก
Math: ∀x ∈ ℝ, x² ≥ 0; ∑ᵢ aᵢ = ∫₀¹ f(t) dt; α + β = γ. Full width: ＡＢＣ１２３。
""",
    # text beginning with spaces or a tab
    " The answer is 42, with a leading space.",
    "  Two leading spaces, then text.",
    "\tA leading tab.",
    "\n\nTwo leading newlines.",
    " ",
    # a chat in Gemma's turn format
    """<start_of_turn>user
You are a helpful assistant. Translate "good morning" into French, Japanese and Arabic.<end_of_turn>
<start_of_turn>model
Sure! Here are the translations:

* French: **Bonjour**
* Japanese: **おはようございます** (ohayō gozaimasu)
* Arabic: **صباح الخير** (ṣabāḥ al-khayr)<end_of_turn>
<start_of_turn>user
Now write a Python one-liner that prints them.<end_of_turn>
<start_of_turn>model
```python
print("\\n".join(["Bonjour", "おはようございます", "صباح الخير"]))
```<end_of_turn>
""",
    "<bos><start_of_turn>user\nHi!<end_of_turn>\n<start_of_turn>model\n",
]


def real_text():
    """REAL_TEXT's documents, then the whole of it as one text, then each of its lines."""
    whole = "\n".join(REAL_TEXT)
    lines = [l for l in whole.split("\n") if l]
    return REAL_TEXT + [whole] + lines
