#!/usr/bin/python3
"""CLIP's tokenizer as its reference does it, written here in Python from the steps that
../shared/models/clip/PROVENANCE.md lists (with Python's own html.unescape, str.lower and the
`regex` module's pattern, the same libraries the reference uses), and random texts to compare
vidfeat's C tokenizer with: the texts test_tokenizer checks beyond the 1,200 reference lines.

    clip_tokens.py VOCAB.txt.gz OUT.jsonl [--count N] [--seed S]

writes N (default 3000) lines {"text": ..., "ids": [...]} like tokens-reference.jsonl. The
reference's ftfy.fix_text is not in Debian; here, as in vidfeat, only its last step (NFC) is
done, so the texts may hold what the rest of fix_text would repair (control characters among
the white space, ligatures): they test the steps after it, on both sides the same. BPE is the
reference's plain loop (lowest-ranked pair, every occurrence left to right), not the heap the C
code uses.
"""
import argparse
import gzip
import html
import html.entities
import json
import os
import random
import sys
import unicodedata

try:
    import regex
except ImportError:  # Debian's python3-regex (scripts/setup.sh installs it)
    print("skipped: no Python regex module (python3-regex)")
    sys.exit(77)

CONTEXT = 77
PATTERN = regex.compile(
    r"""<\|startoftext\|>|<\|endoftext\|>|'s|'t|'re|'ve|'m|'ll|'d|[\p{L}]+|[\p{N}]|[^\s\p{L}\p{N}]+""",
    regex.IGNORECASE)


def byte_stand_ins():
    printable = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    order = printable + [b for b in range(256) if b not in printable]
    return chars, order


class Reference:
    def __init__(self, vocab_path):
        lines = gzip.open(vocab_path).read().decode("utf-8").split("\n")
        merges = [tuple(line.split()) for line in lines[1:49152 - 256 - 2 + 1]]
        self.stand_in, order = byte_stand_ins()
        vocab = [self.stand_in[b] for b in order]
        vocab += [v + "</w>" for v in vocab]
        vocab += ["".join(m) for m in merges]
        vocab += ["<|startoftext|>", "<|endoftext|>"]
        self.ids = {tok: i for i, tok in enumerate(vocab)}
        self.ranks = {m: i for i, m in enumerate(merges)}

    def bpe(self, piece):
        if piece in ("<|startoftext|>", "<|endoftext|>"):
            return [piece]
        word = list(piece[:-1]) + [piece[-1] + "</w>"]
        while len(word) > 1:
            pairs = {(word[i], word[i + 1]) for i in range(len(word) - 1)}
            best = min(pairs, key=lambda p: self.ranks.get(p, float("inf")))
            if best not in self.ranks:
                break
            merged, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    merged.append(word[i] + word[i + 1])
                    i += 2
                else:
                    merged.append(word[i])
                    i += 1
            word = merged
        return word

    def encode(self, text):
        text = unicodedata.normalize("NFC", text)
        text = html.unescape(html.unescape(text)).strip()
        text = regex.sub(r"\s+", " ", text).strip().lower()
        ids = []
        for piece in PATTERN.findall(text):
            piece = "".join(self.stand_in[b] for b in piece.encode("utf-8"))
            ids += [self.ids[tok] for tok in self.bpe(piece)]
        ids = [49406] + ids + [49407]
        if len(ids) > CONTEXT:
            ids = ids[:CONTEXT]
            ids[-1] = 49407
        return ids


# Characters assigned since long before the Unicode versions of Python, the regex module and ICU
# (so that none of them sees an unassigned character the others know).
ALPHABETS = [
    "abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "0123456789",
    "àáâãäåæçèéêëìíîïñòóôõöøùúûüýÿßÀÉÎÕÜÇŒœſİıĳ", "ΑΒΓΔΕΖΗΘΣσςωΩάέή", "абвгдежзийклмнопЖЩЯЁё",
    "אבגדהוזחט", "ابتثجحخد", "あいうえおかきくけこアイウエオ", "東京北京日本語中文字漢", "서울거리한국어",
    "०१२३४५६७८९", "٠١٢٣٤٥٦٧٨٩", "²³¹¼½¾ⅠⅡⅢⅣ①②③", "ｱｲｳ", "ḁḂḃẞ",
]
PUNCT = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~¡¿«»§¶°±×÷–—…•€£¥©®™"
SPACES = ["\t", "\n", "\x0b", "\x0c", "\r", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\xa0",
          "\u1680", "\u2000", "\u2003", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f",
          "\u205f", "\u3000", "\u200b", "\u180e", "  ", " "]
EMOJI = ["🐶", "🐱", "🚗", "💨", "❤️", "👍🏽", "👨‍👩‍👧", "🇫🇷", "😀", "🎉", "✨", "☕"]
COMBINING = ["e\u0301", "a\u0308", "o\u0302\u0323", "n\u0303", "\u1100\u1161", "c\u0327"]
SPECIAL = ["<|startoftext|>", "<|endoftext|>", "<|ENDOFTEXT|>", "<|ſtartoftext|>",
           "<|endoftext", "x<|endoftext|>y", "?<|endoftext|>"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'RE", "'ſ", "''s", "n't",
                "’s", "'x"]


def entity(rng):
    kind = rng.randrange(8)
    names = list(html.entities.html5)
    if kind == 0:
        return "&" + rng.choice(names)
    if kind == 1:
        return "&%s" % rng.choice([n for n in names if not n.endswith(";")]) + \
            rng.choice(["", "x", ";", "y;", "1"])
    if kind == 2:
        return "&#%d;" % rng.choice([0, 1, 9, 13, 38, 65, 128, 150, 159, 160, 233, 0xD800,
                                     0xFFFE, 0x1F600, 0x110000, 10 ** 12, 8364])
    if kind == 3:
        return "&#x%X%s" % (rng.choice([0x41, 0xE9, 0x80, 0x9D, 0xDFFF, 0x10FFFF, 0xFDD0, 0x2028]),
                            rng.choice([";", "", "z"]))
    if kind == 4:
        return rng.choice(["&#", "&#x", "&#xg;", "&;", "& ", "&&amp;", "&amp;amp;",
                           "&amp;lt;", "&foo;", "&ampamp;", "&copy2023", "&notin", "&notit;"])
    if kind == 5:
        return "&" + "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(40))
    return "&" + rng.choice(names).upper()


def fragment(rng):
    kind = rng.randrange(12)
    if kind <= 2:
        alphabet = rng.choice(ALPHABETS)
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
    if kind == 3:
        return "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 4)))
    if kind == 4:
        return rng.choice(SPACES)
    if kind == 5:
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 3)))
    if kind == 6:
        return rng.choice(COMBINING)
    if kind == 7:
        return rng.choice(SPECIAL)
    if kind == 8:
        return rng.choice(CONTRACTIONS)
    if kind == 9:
        return entity(rng)
    if kind == 10:
        return str(rng.randint(0, 10 ** rng.randint(1, 9)))
    return rng.choice(["a photo of a dog", "The Harbour in snow", "A RED CAR AT NIGHT",
                       "ΟΔΟΣ", "İstanbul", "straße", "ﬁne", "x" * rng.randint(20, 400)])


def text(rng):
    if rng.random() < 0.05:  # long enough to be cut to the context
        return " ".join(fragment(rng) for _ in range(rng.randint(60, 200)))
    return "".join(fragment(rng) for _ in range(rng.randint(0, 12)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("vocab")
    ap.add_argument("out")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    if not os.path.isfile(a.vocab):
        print("skipped: no vocabulary at %s" % a.vocab)
        return 77
    ref = Reference(a.vocab)
    rng = random.Random(a.seed)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out + ".part", "w", encoding="utf-8") as f:
        for _ in range(a.count):
            t = text(rng)
            f.write(json.dumps({"text": t, "ids": ref.encode(t)}, ensure_ascii=True) + "\n")
    os.replace(a.out + ".part", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
