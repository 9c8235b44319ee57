"""Attribution: the tool at fault for a failed run, from the program's data flow."""
