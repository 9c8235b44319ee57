# The cheapest book about gardens: who wrote it, and which shop has the most copies?
# An atc program: every tool of the bookshop collection is a global function, called with
# keyword arguments; what the program prints is its answer. Run it against the offline mock:
#   atc mock atc/examples/bookshop/openapi.json --port 8000 &
#   atc run atc/examples/bookshop/program.py --tools atc/examples/bookshop/openapi.json \
#       --base-url http://127.0.0.1:8000
# ruff: noqa: F821  (the tools are globals that atc provides)

hits = search_books(query="garden", limit=3)["results"]
best = min(hits, key=lambda hit: hit["price"])
book = get_book(book_id=best["id"])
author = get_author(author_id=book["author_id"])
stock = get_book_stock(book_id=book["id"])

shops = sorted(stock["shops"], key=lambda shop: shop["copies"], reverse=True)
total = sum(shop["copies"] for shop in shops)
if total > 0:
    where = f"{shops[0]['shop_name']} has {shops[0]['copies']} of the {total} copies in stock"
else:
    where = "no shop has a copy right now"
print(f"{book['title']} by {author['name']} (born {author.get('born', '?')}), "
      f"{book['price']:.2f} {book['currency']}: {where}.")
