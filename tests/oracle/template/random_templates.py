"""A seeded generator of random Jinja templates (expressions, filters, tests, methods, loops,
macros, set/namespace, comments, whitespace control in every combination) for the
differential test against jinja2. Deterministic for a given seed."""
import random

NAMES = ["s", "n", "f", "neg", "l", "e", "t", "z", "d", "u", "none", "msgs", "people", "ws", "nested", "missing"]
STRINGS = ["''", "'a'", "' x '", "'a,b'", "'Hello'", "'\\n'", "'é✓'", "\"q'\"", "'  \\t'", "'{}'", "'%s'", "'1'", "'2.5'"]
ATTRS = ["role", "content", "a", "b", "name", "age", "x", "tool_calls", "length", "missing"]
FILTERS = ["upper", "lower", "title", "capitalize", "trim", "length", "first", "last", "list", "string", "int", "float",
           "abs", "reverse|list", "sort", "unique|list", "tojson", "join(',')", "default('D')", "d('x', true)",
           "replace('a', 'b')", "indent(2)", "wordcount", "dictsort", "items|list", "map('string')|list",
           "select|list", "reject('none')|list", "selectattr('role')|list", "map(attribute='name')|list", "min", "max",
           "sum", "batch(2)|list", "round(1)", "center(5)", "truncate(5)", "escape", "safe", "tojson(indent=1)",
           "count", "join", "format(1)", "tojson(sort_keys=true)"]
TESTS = ["defined", "undefined", "none", "string", "number", "integer", "float", "mapping", "sequence", "iterable",
         "boolean", "true", "false", "odd", "even", "divisibleby 2", "eq 1", "in [1, 2]", "lower", "upper", "callable"]
METHODS = ["strip()", "split(',')", "upper()", "lower()", "startswith('a')", "endswith('o')", "replace('l', 'L')",
           "get('a')", "keys()|list", "values()|list", "items()|list", "split()", "title()", "find('l')", "count('l')",
           "rstrip('o')", "lstrip()", "format(1)", "join(['x', 'y'])", "splitlines()", "rsplit(',', 1)"]
BINOPS = ["+", "-", "*", "/", "//", "%", "~", "==", "!=", "<", ">=", "and", "or", "in", "not in", "**"]


class Gen:
    def __init__(self, seed):
        self.r = random.Random(seed)
        self.loop_vars = []
        self.macros = []

    def pick(self, xs):
        return self.r.choice(xs)

    def atom(self):
        k = self.r.randrange(10)
        if k < 3:
            return self.pick(NAMES + self.loop_vars)
        if k < 5:
            return self.pick(STRINGS)
        if k == 5:
            return self.pick(["0", "1", "2", "-3", "10", "2.5", "0.1", "1e3", "true", "false", "none"])
        if k == 6:
            return f"[{', '.join(self.expr(1) for _ in range(self.r.randrange(3)))}]"
        if k == 7:
            return f"{{'a': {self.expr(1)}, 'b': {self.expr(1)}}}"
        if k == 8 and self.loop_vars:
            return self.pick(["loop.index", "loop.first", "loop.last", "loop.length", "loop.revindex", "loop.previtem"])
        return self.pick(NAMES)

    def expr(self, depth=2):
        if depth <= 0:
            return self.atom()
        k = self.r.randrange(12)
        if k < 3:
            return self.atom()
        if k == 3:
            return f"{self.expr(depth - 1)} {self.pick(BINOPS)} {self.expr(depth - 1)}"
        if k == 4:
            return f"{self.expr(depth - 1)}|{self.pick(FILTERS)}"
        if k == 5:
            neg = self.pick(["", "not "])
            return f"{self.expr(depth - 1)} is {neg}{self.pick(TESTS)}"
        if k == 6:
            return f"{self.pick(NAMES)}.{self.pick(ATTRS)}"
        if k == 7:
            return f"{self.pick(['s', 'ws', 'u', 'd', 'l', 'msgs[1].content', 'people[0]'])}.{self.pick(METHODS)}"
        if k == 8:
            return f"{self.pick(['l', 's', 'msgs', 'u', 'people'])}[{self.pick(['0', '-1', '1:', ':2', '::-1', '5', 'n', 'a'])}]"
        if k == 9:
            return f"({self.expr(depth - 1)} if {self.expr(depth - 1)} else {self.expr(depth - 1)})"
        if k == 10 and self.macros:
            return f"{self.pick(self.macros)}({self.expr(depth - 1)})"
        return f"({self.pick(['-', 'not ', ''])}{self.expr(depth - 1)})"

    def ws(self):
        return self.pick(["", "", "", " ", "\n", "  ", "\n  ", "\t", "\n\n", " \n "])

    def mod(self):
        return self.pick(["", "", "", "-", "+"])

    def tag(self, body):
        return "{%" + self.mod() + " " + body + " " + self.mod().replace("+", "") + "%}"

    def stmts(self, depth, n):
        return "".join(self.stmt(depth) for _ in range(n))

    def stmt(self, depth):
        k = self.r.randrange(12 if depth > 0 else 5)
        w = self.ws()
        if k == 0:
            return w + self.pick(["text", "A b", "x\ny", "  ", "\n", "é"]) + self.ws()
        if k in (1, 2):
            return w + "{{" + self.pick(["", "-"]) + " " + self.expr() + " " + self.pick(["", "-"]) + "}}" + self.ws()
        if k == 3:
            return w + "{#" + self.pick(["", "-"]) + " c " + self.pick(["", "-"]) + "#}" + self.ws()
        if k == 4:
            name = self.pick(["v1", "v2", "n", "s"])
            return w + self.tag(f"set {name} = {self.expr()}") + self.ws()
        if k in (5, 6):
            out = w + self.tag(f"if {self.expr()}") + self.stmts(depth - 1, 2)
            if self.r.random() < 0.4:
                out += self.tag(f"elif {self.expr()}") + self.stmts(depth - 1, 1)
            if self.r.random() < 0.5:
                out += self.tag("else") + self.stmts(depth - 1, 1)
            return out + self.tag("endif") + self.ws()
        if k in (7, 8):
            var = self.pick(["i", "m", "x"])
            it = self.pick(["l", "msgs", "people", "range(3)", "d", "s", "e", "d|dictsort", "l|reverse", self.expr(1)])
            target = "k, v" if it == "d|dictsort" else var
            cond = f" if {self.expr(1)}" if self.r.random() < 0.2 else ""
            self.loop_vars.append(var)
            body = self.stmts(depth - 1, 2)
            if self.r.random() < 0.2:
                body += self.tag(f"if {self.expr(1)}") + self.tag(self.pick(["break", "continue"])) + self.tag("endif")
            self.loop_vars.pop()
            out = w + self.tag(f"for {target} in {it}{cond}") + body
            if self.r.random() < 0.3:
                out += self.tag("else") + self.stmts(depth - 1, 1)
            return out + self.tag("endfor") + self.ws()
        if k == 9:
            name = f"mac{len(self.macros)}"
            body = self.stmts(depth - 1, 2)
            self.macros.append(name)
            return w + self.tag(f"macro {name}(a, b='B')") + "{{ a }}" + body + self.tag("endmacro") + self.ws()
        if k == 10:
            return (w + self.tag("set ns = namespace(c=0, items=[])") + self.tag("for i in l") +
                    self.tag("set ns.c = ns.c + i") + self.tag("set ns.items = ns.items + [i]") + self.tag("endfor") +
                    "{{ ns.c }}{{ ns.items }}" + self.ws())
        return w + self.tag("set blk") + self.stmts(depth - 1, 1) + self.tag("endset") + "[{{ blk|trim }}]" + self.ws()


def generate(seed):
    g = Gen(seed)
    return g.stmts(3, g.r.randrange(1, 6))
