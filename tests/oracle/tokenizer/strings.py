"""Deterministic, varied test strings for tokenizer comparisons (and the benchmark's text).

    from strings import test_strings, mixed_text
    cases = test_strings(seed=1234, special=["<|im_start|>", "<|im_end|>"])   # list of str
    text = mixed_text(1 << 20, seed=7)                                         # ~1 MB str

Kinds: multilingual prose, code, whitespace runs, numbers, emoji, contractions, special-token
text (whole, partial, adjacent), random assigned code points, random ASCII, combining marks,
and random concatenations of all of those.
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
