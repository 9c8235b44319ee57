# Which open tasks of the busiest project are urgent or high priority, and whom to ask about each?
# An atc program: every tool of the tasks collection is a global function, called with keyword
# arguments; what the program prints is its answer. Run it against the offline mock:
#   atc mock atc/examples/tasks/openapi.yaml --port 8000 &
#   atc run atc/examples/tasks/program.py --tools atc/examples/tasks/openapi.yaml \
#       --base-url http://127.0.0.1:8000
# ruff: noqa: F821  (the tools are globals that atc provides)

projects = list_projects(archived=False, per_page=20)["projects"]
project = max(projects, key=lambda p: p["open_tasks"])

# Follow the pages (a page names the next one), but read at most three: a program has a call budget.
# Keyed by id: a task can show up twice when the list changes while it is being paged through.
urgent, page = {}, 1
for _ in range(3):
    listing = list_project_tasks(project_id=project["id"], page=page, per_page=20)
    for task in listing["tasks"]:
        if task["status"] != "done" and task["priority"] in ("urgent", "high"):
            urgent[task["id"]] = task
    page = listing["next_page"]
    if page is None:
        break
urgent = sorted(urgent.values(), key=lambda task: (task["priority"] != "urgent", task["due"] or "9999"))

emails = {}
for task in urgent:
    who = task["assignee"]
    if who and who["user_id"] not in emails:
        emails[who["user_id"]] = get_user(user_id=who["user_id"])["email"]

lead = get_user(user_id=project["lead"]["user_id"])
print(f"{project['name']} (lead {lead['name']} <{lead['email']}>): "
      f"{len(urgent)} open tasks of high or urgent priority")
for task in urgent[:10]:
    who = task["assignee"]
    owner = f"{who['user_name']} <{emails[who['user_id']]}>" if who else "nobody yet"
    print(f"- [{task['priority']}] {task['title']}, due {task['due'] or 'some day'}: {owner}")
