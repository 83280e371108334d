"""JSON schemas the pipeline asks LLMs for, and a minimal validator for the subset of JSON Schema they use.

Supported keywords: ``type`` (object, array, string, integer, number, boolean), ``properties``, ``required``,
``items``, ``enum``, ``maxItems``, ``minItems``, ``minLength``, ``maxLength``. Arrays and strings are bounded
(``maxItems``, ``maxLength``) so a small model cannot loop inside constrained decoding.
"""

from __future__ import annotations

import json
from typing import Any

MAX_PLAN_NODES = 5  # bounded so small models cannot loop; PankRAG plans are a handful of sub-questions
MAX_QUESTION_CHARS = 300
MAX_ANSWER_CHARS = 1200


def _string_list(max_items: int, max_chars: int) -> dict[str, Any]:
    return {"type": "array", "maxItems": max_items, "items": {"type": "string", "maxLength": max_chars}}


PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nodes": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_PLAN_NODES,
            "items": {
                "type": "object",
                "properties": {
                    "id": {"type": "string", "minLength": 1, "maxLength": 8},
                    "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
                    "depends_on": _string_list(MAX_PLAN_NODES, 8),
                    "relation": {"type": "string", "enum": ["parallel", "progress"]},
                },
                "required": ["id", "question", "depends_on", "relation"],
            },
        }
    },
    "required": ["nodes"],
}

ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": MAX_ANSWER_CHARS}},
    "required": ["answer"],
}

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


class SchemaViolation(ValueError):
    """A JSON value does not match its schema; the message names the path."""


def validate(value: Any, schema: dict[str, Any], path: str = "$") -> None:
    """Raise ``SchemaViolation`` (naming the JSON path) when ``value`` does not match ``schema``."""
    kind = schema.get("type")
    if kind is not None:
        allowed = _TYPES.get(kind)
        if allowed is None:
            raise SchemaViolation(f"{path}: unsupported schema type {kind!r}")
        if not isinstance(value, allowed) or (kind in ("integer", "number") and isinstance(value, bool)):
            raise SchemaViolation(f"{path}: expected {kind}, got {type(value).__name__}")
    if "enum" in schema and value not in schema["enum"]:
        raise SchemaViolation(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, str) and len(value.strip()) < schema.get("minLength", 0):
        raise SchemaViolation(f"{path}: string shorter than {schema['minLength']}")
    if isinstance(value, str) and "maxLength" in schema and len(value) > schema["maxLength"]:
        raise SchemaViolation(f"{path}: string longer than {schema['maxLength']}")
    if isinstance(value, list):
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise SchemaViolation(f"{path}: {len(value)} items, at most {schema['maxItems']} allowed")
        if len(value) < schema.get("minItems", 0):
            raise SchemaViolation(f"{path}: {len(value)} items, at least {schema['minItems']} required")
        if "items" in schema:
            for i, item in enumerate(value):
                validate(item, schema["items"], f"{path}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                raise SchemaViolation(f"{path}: missing required key {key!r}")
        for key, sub in schema.get("properties", {}).items():
            if key in value:
                validate(value[key], sub, f"{path}.{key}")


def describe(schema: dict[str, Any]) -> str:
    """A one-line instruction for backends without constrained decoding (sampling, plain chat)."""
    return (
        "Reply with a single JSON value and nothing else (no prose, no code fences). It must match this JSON "
        f"schema: {json.dumps(schema, separators=(',', ':'))}"
    )
