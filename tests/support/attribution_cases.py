"""Failing programs against the library API (tests/support/apis/library.py) and the tool each failure
must be attributed to (None: the program's own logic).

Every program is one a model could plausibly write: it guesses keys the responses do not have
(``list_author_books`` items carry no ``tags`` or ``rating``; authors have no ``nationality``),
passes wrong arguments, hits 404s, or makes a plain logic mistake. ``expected_line`` is where
the error surfaces (the innermost program frame; for a ToolError the line of the call).

Shared by the in-process harness (tests/sandbox/attribution/test_attribution.py) and the real sandbox
(tests/sandbox/attribution/test_attribution_e2e.py). Programs that call ``create_order`` need the API key.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    name: str
    program: str
    expected_tool: str | None
    expected_type: str
    expected_line: int
    #: the response keys the attributed call really returned (checked in the condensed shape)
    shape_keys: tuple[str, ...] = ()


def _p(text: str) -> str:
    return text.strip("\n") + "\n"


CASES: list[Case] = [
    # -- tool responses used wrongly, near and far ----------------------------------------
    Case("key_error_direct", _p("""
print(get_stats()["titles"])
"""), "get_stats", "KeyError", 1, ("authors", "books")),
    Case("key_error_several_assignments_away", _p("""
r = search_authors(name="Le Guin")
people = r["results"]
person = people[0]
info = person
print(info["nationality"])
"""), "search_authors", "KeyError", 5, ("results", "count")),
    Case("index_error_on_empty_results", _p("""
hits = search_authors(name="Tolkien")["results"]
print(hits[0]["name"])
"""), "search_authors", "IndexError", 2, ("results", "count")),
    Case("attribute_error_on_dict", _p("""
a = get_author(author_id=2)
print(a.name)
"""), "get_author", "AttributeError", 2, ("id", "name", "born", "country")),
    Case("type_error_iterating_a_dict", _p("""
res = search_authors(name="Lem")
first = res["results"][0]
books = list_author_books(author_id=first["id"])
titles = [b["title"] for b in books]
print(titles)
"""), "list_author_books", "TypeError", 4, ("author_id", "books")),
    Case("second_tool_fed_by_first", _p("""
hit = search_authors(name="Octavia")["results"][0]
books = list_author_books(author_id=hit["id"])
print(books["books"][0]["tags"])
"""), "list_author_books", "KeyError", 3, ("author_id", "books")),
    Case("reassigned_name_latest_value", _p("""
data = get_author(author_id=1)
data = get_stats()
print(data["name"])
"""), "get_stats", "KeyError", 3, ("books", "authors")),
    Case("two_tools_one_line_second_fails", _p("""
print(get_author(author_id=1)["name"], get_book(book_id=10)["author"])
"""), "get_book", "KeyError", 1, ("title", "tags")),
    Case("two_tools_one_line_first_fails", _p("""
print(get_author(author_id=1)["books"], get_book(book_id=10)["title"])
"""), "get_author", "KeyError", 1, ("name", "born")),
    Case("walrus_then_type_error", _p("""
if (hits := search_authors(name="Lem")["results"]):
    print(hits[0]["born"] + " years")
"""), "search_authors", "TypeError", 2, ("results",)),
    Case("unpacking_a_split_name", _p("""
first, last = get_author(author_id=1)["name"].split(" ")
print(last)
"""), "get_author", "ValueError", 1, ("name",)),
    Case("for_over_an_integer", _p("""
stats = get_stats()
for n in stats["books"]:
    print(n)
"""), "get_stats", "TypeError", 2, ("books",)),
    Case("augmented_assignment_in_loop", _p("""
total = 0
for b in list_author_books(author_id=2)["books"]:
    total += b["title"]
print(total)
"""), "list_author_books", "TypeError", 3, ("books",)),
    Case("appended_results", _p("""
found = []
for i in (1, 2):
    found.append(get_author(author_id=i))
print(found[0]["books"])
"""), "get_author", "KeyError", 4, ("name",)),
    # -- the tool at fault is not the last one called ---------------------------------------
    Case("earlier_tool_after_later_call", _p("""
author = get_author(author_id=2)
books = list_author_books(author_id=2)["books"]
print(author["nationality"], len(books))
"""), "get_author", "KeyError", 3, ("name", "country")),
    Case("pipeline_fails_on_first_step", _p("""
hits = search_authors(name="Butler")
author = hits["results"][0]
books = list_author_books(author_id=author["id"])["books"]
reviews = list_book_reviews(book_id=books[0]["id"])
print(author["birth_year"], len(reviews))
"""), "search_authors", "KeyError", 5, ("results",)),
    Case("helper_over_books_after_stats", _p("""
def label(book):
    return book["title"] + " by " + book["author"]

books = [get_book(book_id=i) for i in (10, 20)]
stats = get_stats()
print([label(b) for b in books], stats["books"])
"""), "get_book", "KeyError", 2, ("title", "author_id")),
    Case("order_read_after_book", _p("""
order = create_order(book_id=10, quantity=1)
book = get_book(book_id=order["book_id"])
print(book["title"], order["price"])
"""), "create_order", "KeyError", 3, ("order_id", "total")),
    # -- helpers, lambdas, comprehensions, globals ----------------------------------------
    Case("error_inside_helper_two_functions", _p("""
def first_author(name):
    found = search_authors(name=name)
    return found["results"][0]

def describe(author):
    return author["name"] + " (" + author["nationality"] + ")"

a = first_author("Butler")
print(describe(a))
"""), "search_authors", "KeyError", 6, ("results",)),
    Case("helper_keyword_argument", _p("""
def price_of(book, currency="EUR"):
    return book["price"][currency]

b = get_book(book_id=20)
print(price_of(book=b))
"""), "get_book", "TypeError", 2, ("price", "title")),
    Case("lambda_key_in_sorted", _p("""
books = list_author_books(author_id=1)["books"]
ranked = sorted(books, key=lambda b: b["rating"])
print(ranked)
"""), "list_author_books", "KeyError", 2, ("books",)),
    Case("lambda_in_map", _p("""
reviews = list_book_reviews(book_id=10)
stars = list(map(lambda r: r["stars"], reviews))
print(stars)
"""), "list_book_reviews", "KeyError", 2, ("user", "rating", "text")),
    Case("nested_comprehension", _p("""
books = list_author_books(author_id=2)["books"]
tags = [t for b in books for t in b["tags"]]
print(tags)
"""), "list_author_books", "KeyError", 2, ("books",)),
    Case("global_read_inside_function", _p("""
stats = get_stats()

def ratio():
    return stats["authors"] / stats["reviews"]

print(ratio())
"""), "get_stats", "KeyError", 4, ("books", "authors")),
    # -- library functions failing on tool data --------------------------------------------
    Case("int_of_a_name", _p("""
a = get_author(author_id=3)
year = int(a["name"])
print(year)
"""), "get_author", "ValueError", 2, ("name",)),
    Case("sorted_dicts", _p("""
reviews = list_book_reviews(book_id=30)
best = sorted(reviews)
print(best[0])
"""), "list_book_reviews", "TypeError", 2, ("rating",)),
    Case("json_loads_on_a_title", _p("""
import json
book = get_book(book_id=10)
meta = json.loads(book["title"])
print(meta)
"""), "get_book", "JSONDecodeError", 3, ("title",)),
    # -- tool errors: arguments and HTTP ---------------------------------------------------
    Case("wrong_argument_name", _p("""
book = get_book(id=10)
print(book)
"""), "get_book", "ToolError", 1),
    Case("missing_required_argument", _p("""
x = 1
reviews = list_book_reviews(limit=2)
print(reviews)
"""), "list_book_reviews", "ToolError", 2),
    Case("wrong_argument_type", _p("""
book = get_book(book_id="ten")
print(book)
"""), "get_book", "ToolError", 1),
    Case("positional_argument", _p("""
book = get_book(10)
print(book)
"""), "get_book", "TypeError", 1),
    Case("not_found_inside_loop", _p("""
total = 0
for book_id in [10, 11, 12]:
    b = get_book(book_id=book_id)
    total += b["price"]
print(total)
"""), "get_book", "ToolError", 3),
    Case("unknown_book_in_order", _p("""
order = create_order(book_id=99, quantity=2)
print(order)
"""), "create_order", "ToolError", 1),
    Case("reraised_tool_error", _p("""
try:
    b = get_book(book_id=99)
except ToolError as e:
    raise RuntimeError("lookup failed") from e
"""), "get_book", "RuntimeError", 4),
    # -- the program's own logic ------------------------------------------------------------
    Case("divide_by_local_zero", _p("""
x = 0
print(10 / x)
"""), None, "ZeroDivisionError", 2),
    Case("divide_tool_data_by_local_zero", _p("""
stats = get_stats()
count = 0
print(stats["books"] / count)
"""), None, "ZeroDivisionError", 3),
    Case("int_of_a_literal", _p("""
stats = get_stats()
n = int("abc")
"""), None, "ValueError", 2),
    Case("undefined_name", _p("""
r = get_stats()
print(totl)
"""), None, "NameError", 2),
    Case("assert_on_local_data", _p("""
r = get_stats()
limit = 3
assert limit > 5, "limit too small"
"""), None, "AssertionError", 3),
    Case("deliberate_raise", _p("""
r = search_authors(name="Nobody")
if not r["results"]:
    raise LookupError("no author found")
"""), None, "LookupError", 3),
]
