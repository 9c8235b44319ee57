# What leaves the harbour next from a stop with step-free access, how late is it, and is anything
# wrong on its line? An atc program: every tool of the transit collection is a global function,
# called with keyword arguments; what the program prints is its answer. Run it against the mock:
#   atc mock atc/examples/transit/swagger.json --port 8000 &
#   atc run atc/examples/transit/program.py --tools atc/examples/transit/swagger.json \
#       --base-url http://127.0.0.1:8000
# ruff: noqa: F821  (the tools are globals that atc provides)

# Page through the matching stops (offset + limit, up to `total`) until one has step-free access;
# at most three pages, and the first match if none has.
stop, first, offset = None, None, 0
for _ in range(3):
    page = find_stops(name="harbour", offset=offset, limit=10)
    first = first or (page["stops"][0] if page["stops"] else None)
    stop = next((s for s in page["stops"] if s.get("wheelchair_accessible")), None)
    offset += page["limit"]
    if stop or offset >= page["total"]:
        break
stop = stop or first
if stop is None:
    print("No stop is called harbour.")
else:
    board = list_departures(stop_id=stop["stop_id"], limit=6)["departures"]
    warnings = {}  # line id -> the headers of its alerts that are more than information
    for departure in board:
        line_id = departure["line"]["line_id"]
        if line_id not in warnings:
            alerts = list_line_alerts(line_id=line_id)["alerts"]
            warnings[line_id] = [a["header"] for a in alerts if a["severity"] != "info"]
    access = "step-free" if stop.get("wheelchair_accessible") else "not step-free"
    print(f"Next departures from {stop['stop_name']} ({access}):")
    for departure in board:
        if departure["cancelled"]:
            status = "cancelled"
        elif departure["delay_minutes"] > 0:
            status = f"{departure['delay_minutes']} min late"
        else:
            status = "on time"
        alert = "; ".join(warnings[departure["line"]["line_id"]])
        print(f"- {departure['scheduled'][11:16]} {departure['line']['line_name']} to {departure['headsign']}: "
              f"{status}" + (f" (alert: {alert})" if alert else ""))
