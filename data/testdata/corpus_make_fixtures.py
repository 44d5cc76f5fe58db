#!/usr/bin/env python3
"""Writes the corpus_* fixtures of data/ in the exact wiki-18 and KILT layouts.

Run from this folder: python3 corpus_make_fixtures.py
The passages are invented; their shape follows Search-R1's wiki-18.jsonl
({"id": "<row>", "contents": "\"Title\"\ntext"}), Agent-R1's KILT corpus
(corag/kilt-corpus rows {"id", "title", "contents"}) and KILT's
knowledge source (one article per line, "text" a list of paragraphs).
"""
import gzip
import json

ARTICLES = [
    ("Evan Morris", "Evan L. Morris (January 26, 1977 – July 9, 2015) was a lobbyist for Genentech and its parent corporation Roche in Washington."),
    ("Lake Vostok", "Lake Vostok is the largest of Antarctica's almost 400 known subglacial lakes, lying under the Russian Vostok Station."),
    ("Marie Curie", "Marie Curie was a Polish and naturalised-French physicist and chemist who conducted pioneering research on radioactivity."),
    ("Warsaw", "Warsaw is the capital and largest city of Poland. Marie Curie was born in Warsaw in 1867."),
    ("Pierre Curie", "Pierre Curie was a French physicist, a pioneer in crystallography and magnetism; he shared the 1903 Nobel Prize in Physics with Marie Curie."),
    ("Nobel Prize in Physics", "The Nobel Prize in Physics is a yearly award given by the Royal Swedish Academy of Sciences."),
    ("Vostok Station", "Vostok Station is a Russian research station in inland Princess Elizabeth Land, Antarctica, founded in 1957."),
    ("Genentech", "Genentech, Inc., is an American biotechnology corporation headquartered in South San Francisco, California."),
    ("Éthe", "Éthe is a village in the Belgian province of Luxembourg; the the river Ton runs near it."),
    ("Kraków", "Kraków is the second-largest city in Poland and was its capital until 1596, when the court moved to Warsaw."),
]


def dump(path, rows, raw_lines=()):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
        for line in raw_lines:
            f.write(line + "\n")


wiki = [{"id": str(i), "contents": f'"{t}"\n{t} {x}'} for i, (t, x) in enumerate(ARTICLES)]
dump("corpus_wiki18.jsonl", wiki)
with gzip.open("corpus_wiki18.jsonl.gz", "wt", encoding="utf-8") as f:
    for r in wiki:
        f.write(json.dumps(r, ensure_ascii=False) + "\n")

kilt = [{"id": str(1000 + i), "title": t, "contents": f"{t}\n{x}"} for i, (t, x) in enumerate(ARTICLES)]
dump("corpus_kilt.jsonl", kilt)

source = []
for i, (t, x) in enumerate(ARTICLES[:3]):
    source.append({
        "_id": str(5000 + i), "wikipedia_id": str(5000 + i), "wikipedia_title": t,
        "text": [t + "\n", x + "\n", "Section::::Life.\n", "Second paragraph of " + t + ".\n"],
        "anchors": [], "categories": "", "history": {"revid": 1},
    })
dump("corpus_kilt_source.jsonl", source)

# Malformed lines, one per kind, between good ones; the test expects each
# error at the line given in the comment of corpus_malformed.expect.
bad = [
    json.dumps(wiki[0]),                         # 1 ok
    '{"id": "1", "contents": "\\"T\\"\\ntext"',  # 2 truncated JSON
    json.dumps({"id": "2"}),                     # 3 missing contents
    json.dumps({"contents": "\"T\"\nx"}),        # 4 missing id
    "",                                          # 5 blank: ignored
    json.dumps({"id": "4", "contents": 7}),      # 6 contents not a string
    "[1, 2]",                                    # 7 not an object
    json.dumps({"id": 1.5, "contents": "x"}),   # 8 id neither string nor integer
    json.dumps(wiki[1]),                         # 9 ok
]
with open("corpus_malformed.jsonl", "w", encoding="utf-8") as f:
    f.write("\n".join(bad) + "\n")
with open("corpus_malformed.expect", "w", encoding="utf-8") as f:
    f.write("2 \n3 contents\n4 id\n6 contents\n7 \n8 id\n")
