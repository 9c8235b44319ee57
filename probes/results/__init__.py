"""What a probe leaves behind: the documented collection, its OpenAPI document, findings, report."""
