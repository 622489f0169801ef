"""Read a YAML file strictly: syntax errors and duplicate keys are one-line
ConfigErrors with the line number, never tracebacks."""

import yaml

from ..errors import ConfigError


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys (PyYAML keeps the last one
    silently, which hides typos such as two `size:` lines)."""


def _construct_mapping(loader, node, deep=False):
    seen = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigError(None, f"line {key_node.start_mark.line + 1}: duplicate key {key!r}",
                              "each key may appear once per mapping")
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_yaml(path):
    """Parse `path`; return its top-level mapping."""
    try:
        with open(path) as f:
            text = f.read()
    except OSError as err:
        raise ConfigError(path, f"cannot read file: {err.strerror}") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except ConfigError as err:
        raise ConfigError(path, err.what, err.fix) from None
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ConfigError(path, f"{where}invalid YAML: {problem}",
                          "fix the syntax (indentation, colons, quotes)") from None
    if not isinstance(data, dict):
        raise ConfigError(path, "expected a mapping of keys at the top level",
                          "see targets/host.yaml or models/tiny.yaml for the format")
    return data
