"""The action protocols: how a model's answer becomes tool calls, one folder each (its NAME, prompt,
parser and protocol), between the core, whose interface they implement (agent/core/protocol.py), and
the session layer, which builds one by name through `registry`; `base` holds what they share."""
