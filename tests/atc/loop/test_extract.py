"""Getting the program out of model replies, in the shapes models really write them."""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from atc.loop.extract import extract_program, free_names

TOOLS = ["search_authors", "list_author_books", "get_book"]


def test_fenced_python_block_with_prose_around() -> None:
    reply = "Here is the program:\n\n```python\nr = search_authors(name='Lem')\nprint(r['count'])\n```\n\nIt prints the count."
    assert extract_program(reply, TOOLS) == "r = search_authors(name='Lem')\nprint(r['count'])\n"


def test_unlabeled_and_tilde_fences() -> None:
    assert extract_program("```\nprint(get_book(book_id=10))\n```") == "print(get_book(book_id=10))\n"
    assert extract_program("~~~py\nprint(1)\n~~~") == "print(1)\n"


def test_reply_that_is_only_code() -> None:
    code = "books = list_author_books(author_id=2)['books']\nfor b in books:\n    print(b['title'])\n"
    assert extract_program(code, TOOLS) == code


def test_code_after_prose_without_fences() -> None:
    reply = "Sure, this chains the two tools.\nr = search_authors(name='Lem')\nprint(r['results'][0]['id'])"
    assert extract_program(reply, TOOLS) == "r = search_authors(name='Lem')\nprint(r['results'][0]['id'])\n"


def test_several_complete_blocks_take_the_last() -> None:
    reply = ("First try:\n```python\nprint(search_authors(name='x'))\n```\n"
             "Better:\n```python\nr = search_authors(name='Lem')\nprint(r['count'])\n```\n")
    assert extract_program(reply, TOOLS) == "r = search_authors(name='Lem')\nprint(r['count'])\n"


def test_blocks_that_are_parts_are_joined() -> None:
    reply = ("A helper:\n```python\ndef titles(author_id):\n    return [b['title'] for b in "
             "list_author_books(author_id=author_id)['books']]\n```\nThen the main part:\n"
             "```python\nprint(titles(2))\n```")
    program = extract_program(reply, TOOLS)
    assert program is not None and "def titles" in program and program.rstrip().endswith("print(titles(2))")
    compile(program, "<p>", "exec")


def test_non_python_blocks_are_skipped() -> None:
    reply = "The response looks like\n```json\n{\"count\": 1}\n```\nso:\n```python\nprint(1)\n```"
    assert extract_program(reply) == "print(1)\n"


def test_unclosed_fence_from_a_cut_reply() -> None:
    assert extract_program("```python\nx = get_book(book_id=10)\nprint(x['title'])", TOOLS) == \
        "x = get_book(book_id=10)\nprint(x['title'])\n"


def test_indented_block_in_a_list_is_dedented() -> None:
    reply = "1. Run this:\n   ```python\n   x = 1\n   print(x)\n   ```\n"
    assert extract_program(reply) == "x = 1\nprint(x)\n"


def test_think_section_is_dropped() -> None:
    reply = "<think>maybe ```python\nprint('draft')\n``` no</think>\n```python\nprint('final')\n```"
    assert extract_program(reply) == "print('final')\n"


def test_no_program() -> None:
    assert extract_program("") is None
    assert extract_program("I am sorry, I cannot help with that.") is None
    assert extract_program("Sorry") is None
    assert extract_program("The answer is:\n```json\n{\"a\": 1}\n```") is None
    assert extract_program("```python\n\n```") is None


def test_broken_block_is_still_returned_for_the_syntax_error() -> None:
    assert extract_program("```python\nprint(1\n```") == "print(1\n"


def test_free_names() -> None:
    import ast

    tree = ast.parse("import json\nx = get_book(book_id=1)\nprint(json.dumps(x), y)\n")
    assert free_names(tree, ["get_book"]) == {"y"}


def test_long_prose_reply_is_cheap() -> None:
    import time

    prose = "\n".join(f'print("a") is what I would write, case {i}' for i in range(3000))
    started = time.perf_counter()
    assert extract_program(prose) is None
    assert time.perf_counter() - started < 2.0


@settings(max_examples=200, deadline=None)
@given(st.text())
def test_any_reply_gives_a_program_or_none(reply: str) -> None:
    program = extract_program(reply, TOOLS)
    assert program is None or (program.endswith("\n") and program.strip())


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["x = 1", "print(x)", "for i in range(2):", "    print(i)", "y = get_book(book_id=x)"]),
                min_size=1, max_size=8),
       st.sampled_from(["", "Here you go:\n", "Sure.\n\n"]), st.sampled_from(["python", "py", ""]))
def test_fenced_code_comes_back_verbatim(lines: list[str], prose: str, lang: str) -> None:
    code = "\n".join(lines) + "\n"
    try:
        compile(code, "<p>", "exec")
    except SyntaxError:
        assume(False)
    assert extract_program(f"{prose}```{lang}\n{code}```\nDone.", TOOLS) == code
