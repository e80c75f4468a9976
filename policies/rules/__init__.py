"""Policy rules as plain functions of a resource's type and props (engine camelCase).

Resource rules: ``check(type_, props, ctx) -> list[str]``.
Stack rules: ``check(resources, ctx) -> list[tuple[Res | None, str]]``.
Both the Pulumi pack (``policies/__main__.py``) and the offline evaluator
(``policies/offline.py``) call them through ``policies/registry.py``.
"""
