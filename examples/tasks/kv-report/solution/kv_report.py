import json


class KeyValueStore:
    def __init__(self):
        self.data = {}

    def set(self, key, value):
        self.data[key] = value

    def get(self, key, default=None):
        return self.data.get(key, default)

    def delete(self, key):
        return self.data.pop(key, None) is not None

    def exists(self, key):
        return key in self.data

    def list_keys(self):
        return sorted(self.data)

    def filter_by_prefix(self, prefix):
        return {k: v for k, v in self.data.items() if k.startswith(prefix)}

    def export_to_json(self, path):
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.data, f)

    def load_from_json(self, path):
        with open(path, encoding="utf-8") as f:
            self.data = dict(json.load(f))


def generate_report(store):
    prefix_counts = {}
    for key in store.list_keys():
        if ":" in key:
            prefix = key.split(":", 1)[0]
            prefix_counts[prefix] = prefix_counts.get(prefix, 0) + 1
    values = [store.get(key) for key in store.list_keys()]
    return {
        "total_keys": len(values),
        "empty_values": sum(1 for v in values if v == ""),
        "prefix_counts": prefix_counts,
        "largest_value_length": max((len(v) for v in values), default=0),
    }
