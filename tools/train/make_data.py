#!/usr/bin/python3
"""Seeded generator of GSM8K-style multi-step arithmetic word problems (synthetic-gsm8k).

Writes OUT/train.jsonl and OUT/test.jsonl, one {"question": ..., "answer": ...} per line, in
GSM8K's format: the answer is a step-by-step rationale with calculator annotations
("3 * 4 = <<3*4=12>>12") and a last line "#### N". Every problem takes 2-4 steps of +, -, * and
exact division. Numbers stay small (factors <= 6, every number below ~70) so that a tiny
model can learn the arithmetic; the difficulty is in chaining the steps.

The test set is drawn first; train questions that equal a test question are rejected, so the two
sets are disjoint by question text (and each set has no duplicate questions).

Usage: make_data.py --seed 0 --out data/synthetic-gsm8k [--train 24000] [--test 1000]
"""

import argparse
import json
import os
import random

NAMES = ["Tom", "Anna", "Ben", "Lily", "Sam", "Maria", "Jack", "Emma", "Leo", "Mia", "Noah",
         "Zoe", "Omar", "Nina", "Ravi", "Sara", "Paul", "Kate", "Ivan", "Lucy", "Hugo", "Ella",
         "Alex", "Rosa", "Dan", "Amy", "Finn", "Grace", "Kai", "Jade"]
# (plural noun, container) pairs for countable things.
THINGS = [("apples", "bag"), ("pencils", "box"), ("cookies", "tray"), ("marbles", "jar"),
          ("stickers", "pack"), ("eggs", "carton"), ("books", "shelf"), ("cards", "deck"),
          ("flowers", "vase"), ("oranges", "crate"), ("toys", "bin"), ("shells", "bucket"),
          ("candies", "bowl"), ("cupcakes", "plate"), ("stamps", "album"), ("beads", "string")]
ITEMS = [("notebook", "notebooks"), ("pen", "pens"), ("ticket", "tickets"), ("shirt", "shirts"),
         ("sandwich", "sandwiches"), ("toy car", "toy cars"), ("plant", "plants"),
         ("book", "books"), ("cup", "cups"), ("ball", "balls"), ("hat", "hats"),
         ("game", "games")]
ACTIVITIES = [("reads", "pages"), ("runs", "laps"), ("writes", "lines"), ("swims", "laps"),
              ("bakes", "muffins"), ("folds", "paper cranes"), ("paints", "pictures"),
              ("solves", "puzzles")]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


def step(text_before, a, op, b, result, text_after=""):
    """One rationale step: 'text_before a op b = <<a op b=result>>result text_after'."""
    return f"{text_before}{a} {op} {b} = <<{a}{op}{b}={result}>>{result}{text_after}"


def pronoun(name):
    return "she" if name in ("Anna", "Lily", "Maria", "Emma", "Mia", "Zoe", "Nina", "Sara",
                             "Kate", "Lucy", "Ella", "Rosa", "Amy", "Grace", "Jade") else "he"


def cap(s):
    return s[0].upper() + s[1:]


# Each template returns (question, [steps], answer). Steps end with '.' and are joined by '\n'.
def t_boxes_give(r):
    name, (obj, box) = r.choice(NAMES), r.choice(THINGS)
    n, m = r.randint(2, 5), r.randint(2, 6)
    total = n * m
    k = r.randint(1, total - 1)
    he = pronoun(name)
    q = r.choice([
        f"{name} has {n} {box}s of {obj}. Each {box} has {m} {obj}. {cap(he)} gives away {k} {obj}. "
        f"How many {obj} does {name} have left?",
        f"There are {m} {obj} in each {box}. {name} has {n} {box}s and gives {k} {obj} to a friend. "
        f"How many {obj} does {name} have now?",
    ])
    s = [step(f"{name} has ", n, "*", m, total, f" {obj}."),
         step(f"After giving some away, {he} has ", total, "-", k, total - k, f" {obj} left.")]
    return q, s, total - k


def t_buy_two(r):
    name = r.choice(NAMES)
    (i1, p1s), (i2, _) = r.sample(ITEMS, 2)
    n, p, c = r.randint(2, 5), r.randint(2, 6), r.randint(1, 10)
    cost = n * p
    q = r.choice([
        f"{name} buys {n} {p1s} for ${p} each and a {i2} for ${c}. How much does {name} spend?",
        f"A {i1} costs ${p} and a {i2} costs ${c}. {name} buys {n} {p1s} and one {i2}. "
        f"How many dollars does {name} pay in total?",
    ])
    s = [step(f"The {p1s} cost ", n, "*", p, cost, " dollars."),
         step("In total it is ", cost, "+", c, cost + c, " dollars.")]
    return q, s, cost + c


def t_change(r):
    name = r.choice(NAMES)
    _, items = r.choice(ITEMS)
    n, p = r.randint(2, 5), r.randint(2, 6)
    cost = n * p
    money = cost + r.randint(1, 10)
    he = pronoun(name)
    q = r.choice([
        f"{name} has ${money}. {cap(he)} buys {n} {items} that cost ${p} each. "
        f"How much money does {name} have left?",
        f"{name} goes to the store with ${money} and buys {n} {items} at ${p} each. "
        f"How many dollars does {he} have after shopping?",
    ])
    s = [step(f"The {items} cost ", n, "*", p, cost, " dollars."),
         step(f"{name} has ", money, "-", cost, money - cost, " dollars left.")]
    return q, s, money - cost


def t_share(r):
    name, (obj, _) = r.choice(NAMES), r.choice(THINGS)
    k, each = r.randint(2, 5), r.randint(2, 6)
    eat = r.randint(1, each - 1)
    total = k * each
    q = r.choice([
        f"{name} has {total} {obj} and shares them equally among {k} friends. "
        f"Each friend uses {eat} of them. How many {obj} does each friend have left?",
        f"{total} {obj} are split equally between {k} children. Each child gives {eat} away. "
        f"How many {obj} does each child keep?",
    ])
    s = [step("Each one gets ", total, "/", k, each, f" {obj}."),
         step("Each one has ", each, "-", eat, each - eat, f" {obj} left.")]
    return q, s, each - eat


def t_bake_bags(r):
    name, (obj, box) = r.choice(NAMES), r.choice(THINGS)
    k, each = r.randint(2, 5), r.randint(2, 6)
    eat = r.randint(1, 10)
    made = k * each + eat
    he = pronoun(name)
    q = r.choice([
        f"{name} has {made} {obj}. {cap(he)} keeps {eat} and puts the rest into {k} {box}s equally. "
        f"How many {obj} are in each {box}?",
        f"{name} collects {made} {obj}. After keeping {eat} for {'herself' if he == 'she' else 'himself'}, "
        f"{he} splits the rest evenly into {k} {box}s. How many {obj} go in each {box}?",
    ])
    rest = made - eat
    s = [step("The rest is ", made, "-", eat, rest, f" {obj}."),
         step(f"Each {box} gets ", rest, "/", k, each, f" {obj}.")]
    return q, s, each


def t_daily(r):
    name, (verb, unit) = r.choice(NAMES), r.choice(ACTIVITIES)
    per, d1 = r.randint(2, 6), r.randint(2, 5)
    extra = r.randint(1, 10)
    a = per * d1
    q = r.choice([
        f"{name} {verb} {per} {unit} every day for {d1} days. Then {pronoun(name)} {verb} {extra} "
        f"more {unit}. How many {unit} does {name} finish in all?",
        f"Each day {name} {verb} {per} {unit}. After {d1} days, {pronoun(name)} also {verb} {extra} "
        f"extra {unit}. How many {unit} is that in total?",
    ])
    s = [step(f"In {d1} days, {name} {verb} ", per, "*", d1, a, f" {unit}."),
         step("In total that is ", a, "+", extra, a + extra, f" {unit}.")]
    return q, s, a + extra


def t_two_days(r):
    name, (verb, unit) = r.choice(NAMES), r.choice(ACTIVITIES)
    per = r.randint(2, 5)
    d1, d2 = r.sample(DAYS, 2)
    h1, h2 = r.randint(2, 4), r.randint(2, 4)
    a, b = per * h1, per * h2
    q = (f"{name} {verb} {per} {unit} each hour. {cap(pronoun(name))} works {h1} hours on {d1} "
         f"and {h2} hours on {d2}. How many {unit} does {name} finish on the two days?")
    s = [step(f"On {d1}, {name} {verb} ", per, "*", h1, a, f" {unit}."),
         step(f"On {d2}, {name} {verb} ", per, "*", h2, b, f" {unit}."),
         step("Together that is ", a, "+", b, a + b, f" {unit}.")]
    return q, s, a + b


def t_more_twice(r):
    a, b = r.sample(NAMES, 2)
    obj, _ = r.choice(THINGS)
    n, k = r.randint(2, 8), r.randint(1, 6)
    nb = n + k
    mult = 2 if nb > 10 else r.randint(2, 3)
    word = {2: "twice", 3: "three times"}[mult]
    nc = nb * mult
    ask_total = r.random() < 0.5
    q = (f"{a} has {n} {obj}. {b} has {k} more {obj} than {a}. Their teacher has {word} as many "
         f"{obj} as {b}. ")
    s = [step(f"{b} has ", n, "+", k, nb, f" {obj}."),
         step("The teacher has ", nb, "*", mult, nc, f" {obj}.")]
    if ask_total:
        q += "How many do the three have together?"
        s.append(step(f"{a} and {b} have ", n, "+", nb, n + nb, f" {obj}."))
        s.append(step("All three have ", n + nb, "+", nc, n + nb + nc, f" {obj}."))
        return q, s, n + nb + nc
    q += f"How many {obj} does the teacher have?"
    return q, s, nc


def t_rows(r):
    name = r.choice(NAMES)
    thing = r.choice(["tulips", "carrots", "trees", "chairs", "tomato plants", "cars"])
    place = {"tulips": "garden", "carrots": "field", "trees": "park", "chairs": "hall",
             "tomato plants": "garden", "cars": "parking lot"}[thing]
    rows, per, more = r.randint(2, 4), r.randint(2, 6), r.randint(1, 2)
    total_rows = rows + more
    q = r.choice([
        f"A {place} has {rows} rows of {thing} with {per} {thing} in each row. {name} adds {more} "
        f"more rows of the same size. How many {thing} are there now?",
        f"{name} sets up {rows} rows of {thing}, {per} in each row, then sets up {more} more rows "
        f"just like them. How many {thing} does {name} have?",
    ])
    s = [step("There are ", rows, "+", more, total_rows, " rows."),
         step("That is ", total_rows, "*", per, total_rows * per, f" {thing}.")]
    return q, s, total_rows * per


def t_savings(r):
    name = r.choice(NAMES)
    _, items = r.choice(ITEMS)
    weekly, weeks = r.randint(2, 6), r.randint(2, 5)
    saved = weekly * weeks
    price = r.choice([2, 3])
    spend_n = r.randint(1, min(5, saved // price))
    spent = spend_n * price
    q = (f"{name} saves ${weekly} every week for {weeks} weeks. Then {pronoun(name)} buys "
         f"{spend_n} {items} for ${price} each. How much money does {name} have left?")
    s = [step(f"{name} saves ", weekly, "*", weeks, saved, " dollars."),
         step(f"The {items} cost ", spend_n, "*", price, spent, " dollars."),
         step(f"{name} has ", saved, "-", spent, saved - spent, " dollars left.")]
    return q, s, saved - spent


def t_class(r):
    groups, per = r.randint(2, 3), r.randint(2, 5)
    kids = groups * per
    absent = r.randint(1, 3)
    obj, _ = r.choice(THINGS)
    each = r.randint(2, 3) if kids - absent <= 12 else 2
    q = (f"A class has {groups} groups of {per} students. {absent} students are absent today. "
         f"The teacher gives each student who is present {each} {obj}. How many {obj} does the "
         f"teacher give out?")
    here = kids - absent
    s = [step("The class has ", groups, "*", per, kids, " students."),
         step("Present today are ", kids, "-", absent, here, " students."),
         step("The teacher gives out ", here, "*", each, here * each, f" {obj}.")]
    return q, s, here * each


def t_pages_left(r):
    name = r.choice(NAMES)
    per, days = r.randint(2, 6), r.randint(2, 5)
    read = per * days
    left = r.randint(1, 10)
    book = read + left
    q = r.choice([
        f"A book has {book} pages. {name} reads {per} pages a day for {days} days. "
        f"How many pages are left?",
        f"{name} has a {book}-page book and reads {per} pages each day. How many pages are still "
        f"unread after {days} days?",
    ])
    s = [step(f"{name} reads ", per, "*", days, read, " pages."),
         step("There are ", book, "-", read, left, " pages left.")]
    return q, s, left


def t_half_more(r):
    name = r.choice(NAMES)
    obj, _ = r.choice(THINGS)
    half = r.randint(2, 15)
    n = 2 * half
    got = r.randint(1, 10)
    q = r.choice([
        f"{name} had {n} {obj}. {cap(pronoun(name))} gave half of them to a friend and then found "
        f"{got} more. How many {obj} does {name} have now?",
        f"{name} owns {n} {obj}, loses half of them, and then buys {got} more. How many {obj} "
        f"does {name} own now?",
    ])
    s = [step("Half of them is ", n, "/", 2, half, f" {obj}."),
         step(f"{name} has ", half, "+", got, half + got, f" {obj} now.")]
    return q, s, half + got


def t_trip(r):
    name = r.choice(NAMES)
    adults, kids = r.randint(2, 3), r.randint(2, 4)
    pa, pk = r.randint(3, 6), r.randint(2, 4)
    a, k = adults * pa, kids * pk
    q = (f"Tickets to the zoo cost ${pa} for an adult and ${pk} for a child. {name} buys tickets "
         f"for {adults} adults and {kids} children. How much does {name} pay?")
    s = [step("The adult tickets cost ", adults, "*", pa, a, " dollars."),
         step("The child tickets cost ", kids, "*", pk, k, " dollars."),
         step("Together they cost ", a, "+", k, a + k, " dollars.")]
    return q, s, a + k


TEMPLATES = [t_boxes_give, t_buy_two, t_change, t_share, t_bake_bags, t_daily, t_two_days,
             t_more_twice, t_rows, t_savings, t_class, t_pages_left, t_half_more, t_trip]


def make_problem(r):
    q, steps, ans = r.choice(TEMPLATES)(r)
    return {"question": q, "answer": "\n".join(steps) + f"\n#### {ans}"}


def generate(seed, n_train, n_test):
    r = random.Random(seed)
    test, seen = [], set()
    while len(test) < n_test:
        p = make_problem(r)
        if p["question"] not in seen:
            seen.add(p["question"])
            test.append(p)
    test_q = set(seen)
    train = []
    while len(train) < n_train:
        p = make_problem(r)
        if p["question"] not in seen:  # excludes test questions and train duplicates
            seen.add(p["question"])
            train.append(p)
    assert not test_q & {p["question"] for p in train}
    return train, test


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--train", type=int, default=24000)
    ap.add_argument("--test", type=int, default=1000)
    a = ap.parse_args()
    train, test = generate(a.seed, a.train, a.test)
    os.makedirs(a.out, exist_ok=True)
    for name, rows in (("train", train), ("test", test)):
        with open(os.path.join(a.out, f"{name}.jsonl"), "w") as f:
            for p in rows:
                f.write(json.dumps(p) + "\n")
    print(f"wrote {len(train)} train and {len(test)} test problems to {a.out}")


if __name__ == "__main__":
    main()
