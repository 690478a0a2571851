"""What a person or the agent reads: status and brief, the report, serve, export, verify and
`diagnose N`. Everything here reads the log through decision.summary."""
