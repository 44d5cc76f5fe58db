#!/usr/bin/env python3
"""Writes the JSON and JSONL dataset fixtures of package data's tests.

Each file is laid out exactly as the public dataset it imitates
(formats.md §3.1-3.4): HotpotQA and 2WikiMultihopQA as one JSON array,
MuSiQue and FlashRAG as JSONL, all written with Python's json module as the
originals were. The records are small and hand-made; the field names,
nesting and value types are the real ones.

The malformed files come with a .expect file, "line<TAB>field" per bad
record, computed here from where this script put each record, so the Go
tests check the loader's line numbers against an independent count.

Run from this folder: python3 make_dataset_fixtures.py
(the parquet fixtures come from gen/main.go: go run ./gen).
"""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def path(*parts):
    p = os.path.join(HERE, *parts)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    return p


# --- HotpotQA (§3.1): one JSON array on one line, as hotpot_dev_distractor_v1.json.
hotpot = [
    {
        "_id": "5a8b57f25542995d1e6f1371",
        "answer": "yes",
        "question": "Were Scott Derrickson and Ed Wood of the same nationality?",
        "supporting_facts": [["Scott Derrickson", 0], ["Ed Wood", 0]],
        "context": [
            ["Ed Wood", ["Edward Davis Wood Jr. (October 10, 1924 \u2013 December 10, 1978) was an American filmmaker, actor, writer, producer, and director."]],
            ["Scott Derrickson", ["Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer.", " He lives in Los Angeles, California."]],
        ],
        "type": "comparison",
        "level": "hard",
    },
    {
        "_id": "5a8c7595554299585d9e36b6",
        "answer": "Chief of Protocol",
        "question": "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?",
        "supporting_facts": [["Kiss and Tell (1945 film)", 0], ["Shirley Temple", 0], ["Shirley Temple", 1]],
        "context": [
            ["Kiss and Tell (1945 film)", ["Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss Archer."]],
            ["Shirley Temple", ["Shirley Temple Black was an American actress, singer, dancer, businesswoman, and diplomat.", " As an adult, she was named United States ambassador to Ghana and to Czechoslovakia and also served as Chief of Protocol of the United States."]],
        ],
        "type": "bridge",
        "level": "medium",
    },
    {
        "_id": "5ab3b0bf5542992ade7c6e39",
        "answer": "Greenwich Village, New York City",
        "question": "In what neighborhood is the \u201cCaf\u00e9 Wha?\u201d located?",
        "supporting_facts": [["Caf\u00e9 Wha?", 0]],
        "context": [["Caf\u00e9 Wha?", ["Caf\u00e9 Wha? is a nightclub in Greenwich Village, New York City."]]],
        "type": "bridge",
        "level": "easy",
    },
]
with open(path("hotpotqa_dev.json"), "w") as f:
    json.dump(hotpot, f)  # one line, ASCII escapes, as the original

# --- 2WikiMultihopQA (§3.2): HotpotQA's layout plus evidences and entity_ids.
twowiki = [
    {
        "_id": "8813f87c0bdd11eba7f7acde48001122",
        "type": "compositional",
        "question": "Who is the director of film Polish-Russian War (Film)'s father?",
        "context": [
            ["Polish-Russian War (film)", ["Polish-Russian War is a 2009 Polish film directed by Xawery \u017bu\u0142awski."]],
            ["Xawery \u017bu\u0142awski", ["Xawery \u017bu\u0142awski is a Polish film director.", " He is the son of actress Ma\u0142gorzata Braunek and director Andrzej \u017bu\u0142awski."]],
        ],
        "supporting_facts": [["Polish-Russian War (film)", 0], ["Xawery \u017bu\u0142awski", 1]],
        "evidences": [["Polish-Russian War", "director", "Xawery \u017bu\u0142awski"], ["Xawery \u017bu\u0142awski", "father", "Andrzej \u017bu\u0142awski"]],
        "answer": "Andrzej \u017bu\u0142awski",
        "entity_ids": "Q7208285_Q8042048",
    },
    {
        "_id": "4bb3e3a40bdd11eba7f7acde48001122",
        "type": "comparison",
        "question": "Which film came out first, Blind Shaft or The Mask Of Fu Manchu?",
        "context": [
            ["Blind Shaft", ["Blind Shaft is a 2003 film about a pair of brutal con artists."]],
            ["The Mask of Fu Manchu", ["The Mask of Fu Manchu is a 1932 pre-Code adventure film."]],
        ],
        "supporting_facts": [["Blind Shaft", 0], ["The Mask of Fu Manchu", 0]],
        "evidences": [["Blind Shaft", "publication date", "2003"], ["The Mask of Fu Manchu", "publication date", "1932"]],
        "answer": "The Mask Of Fu Manchu",
        "entity_ids": "Q4925134_Q1540120",
        "evidences_id": [],
        "answer_id": "Q1540120",
    },
]
with open(path("2wikimultihopqa_dev.json"), "w") as f:
    json.dump(twowiki, f, indent=1)  # pretty-printed: the records start on known lines

# The test split has no answer, supporting_facts or evidences.
twowiki_test = [{k: v for k, v in r.items() if k not in ("answer", "supporting_facts", "evidences", "evidences_id", "answer_id")} for r in twowiki]
with open(path("2wikimultihopqa_test.json"), "w") as f:
    json.dump(twowiki_test, f)

# --- MuSiQue (§3.3): JSONL.
musique = [
    {
        "id": "2hop__460946_294723",
        "paragraphs": [
            {"idx": 0, "title": "Pakistan Super League", "paragraph_text": "Pakistan Super League (PSL) is a Twenty20 cricket league.", "is_supporting": False},
            {"idx": 1, "title": "Green", "paragraph_text": "Green is the color between blue and yellow.", "is_supporting": True},
        ],
        "question": "Who is the spouse of the Green performer?",
        "question_decomposition": [
            {"id": 460946, "question": "Green >> performer", "answer": "Steve Hillage", "paragraph_support_idx": 1},
            {"id": 294723, "question": "#1 >> spouse", "answer": "Miquette Giraudy", "paragraph_support_idx": 0},
        ],
        "answer": "Miquette Giraudy",
        "answer_aliases": ["Miquette Giraudy-Hillage"],
        "answerable": True,
    },
    {
        "id": "3hop1__9285_5188_23307",
        "paragraphs": [{"idx": 0, "title": "Mortimer", "paragraph_text": "Mortimer is a family name.", "is_supporting": True}],
        "question": "What is the country where the mountain range containing Mortimer is located?",
        "question_decomposition": [
            {"id": 9285, "question": "Mortimer >> located in", "answer": "Range A", "paragraph_support_idx": 0},
            {"id": 5188, "question": "#1 >> part of", "answer": "Range B", "paragraph_support_idx": 0},
            {"id": 23307, "question": "#2 >> country", "answer": "Canada", "paragraph_support_idx": 0},
        ],
        "answer": "Canada",
        "answer_aliases": ["CA", "Canada"],
        "answerable": True,
    },
]
with open(path("musique_dev.jsonl"), "w") as f:
    for r in musique:
        f.write(json.dumps(r) + "\n")

# --- FlashRAG (§3.4): FlashRAG_datasets/<name>/<split>.jsonl; the folder names the source.
flashrag = [
    {"id": "dev_0", "question": "Were Scott Derrickson and Ed Wood of the same nationality?", "golden_answers": ["yes"],
     "metadata": {"type": "comparison", "level": "hard", "supporting_facts": {"title": ["Scott Derrickson", "Ed Wood"], "sent_id": [0, 0]}}},
    {"id": "dev_1", "question": "How many copies of Roald Dahl's variation on a popular anecdote sold?", "golden_answers": ["250 million", 250000000],
     "metadata": {"type": "bridge", "level": "medium"}},
]
with open(path("flashrag", "hotpotqa", "dev.jsonl"), "w") as f:
    for r in flashrag:
        f.write(json.dumps(r) + "\n")
with open(path("flashrag", "nq", "test.jsonl"), "w") as f:
    f.write(json.dumps({"id": "test_0", "question": "who got the first nobel prize in physics", "golden_answers": ["Wilhelm Conrad R\u00f6ntgen"], "metadata": {}}, ensure_ascii=False) + "\n")
    f.write(json.dumps({"id": "test_1", "question": "when is the next deadpool movie being released", "golden_answers": ["May 18, 2018"], "metadata": {}}, ensure_ascii=False) + "\n")

# --- Malformed HotpotQA: pretty-printed so each record has its own line.
# Records are written one by one; the line each starts on is counted here.
good = hotpot[2]
bad_records = [
    (json.dumps(hotpot[0]), None),
    (json.dumps({k: v for k, v in hotpot[1].items() if k != "answer"}), "answer"),
    (json.dumps(dict(hotpot[1], _id="x-type", question=5)), "question"),
    ('{"_id": "x-syntax", "question": "q" "answer": "a"}', ""),  # missing comma, brackets balanced
    (json.dumps(dict(hotpot[1], _id=hotpot[0]["_id"])), "id"),  # duplicate id
    (json.dumps(dict(hotpot[1], _id="x-blank", answer="  ")), "answer"),
    ("[1, 2]", ""),  # not an object
    (json.dumps(good), None),
]
lines = ["["]
expect = []
for i, (text, field) in enumerate(bad_records):
    start = len(lines) + 1
    sep = "," if i < len(bad_records) - 1 else ""
    lines.append(" " + text + sep)
    if field is not None:
        expect.append(f"{start}\t{field}")
lines.append("]")
with open(path("hotpotqa_malformed.json"), "w") as f:
    f.write("\n".join(lines) + "\n")
with open(path("hotpotqa_malformed.expect"), "w") as f:
    f.write("\n".join(expect) + "\n")

# --- Malformed MuSiQue JSONL: one problem per line, blank lines and CRLF mixed in.
m0 = json.dumps(musique[0])
m1 = musique[1]
ml = [
    (m0, None),
    ("", None),  # blank line: ignored, not an error
    ("this is not json", ""),
    (json.dumps({k: v for k, v in m1.items() if k != "question"}), "question"),
    (json.dumps(dict(m1, id="x-aliases", answer_aliases="Canada")), "answer_aliases"),
    (json.dumps(dict(m1, id="x-answerable", answerable="yes")), "answerable"),
    (json.dumps(dict(m1, id="x-noanswer", answer="", answer_aliases=[])), "answer"),
    ('{"id": "x-cut", "question": "q"', ""),  # truncated line
    (json.dumps(dict(m1, id="x-alias-type", answer_aliases=["ok", {"a": 1}])), "answer_aliases[1]"),
    (json.dumps(dict(m1, id="x-crlf")) + "\r", None),  # CRLF line end: fine
    (json.dumps(dict(m1, id="x-last")), None),  # no newline at the end of the file
]
expect = []
with open(path("musique_malformed.jsonl"), "w", newline="") as f:
    for i, (text, field) in enumerate(ml):
        f.write(text + ("\n" if i < len(ml) - 1 else ""))
        if field is not None:
            expect.append(f"{i + 1}\t{field}")
with open(path("musique_malformed.expect"), "w") as f:
    f.write("\n".join(expect) + "\n")
