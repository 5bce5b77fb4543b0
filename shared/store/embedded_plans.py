"""The embedded store's SQL for a filter, translated once per filter shape and reused.

neosqlite translates each command's filter to a SQL ``WHERE`` anew (``SQLTranslator.
translate_match`` for updates and ``findAndModify``, the cursor's
``_build_simple_where_clause`` for finds): about a sixth of a command's CPU, for filters
that differ between commands only in their values (``{"_id": ..., "state": {"$in":
[...]}}``). Here a filter's SHAPE (its fields and operators in order; for each value its
type and whatever neosqlite's translation branches on: a string that reads as a date, a
string that is an ObjectId's hex, a list's length, ``None`` and booleans themselves) keys
the translation, and a later filter of the same shape gets the same SQL with its own
values as parameters (docs/performance.md, "The embedded store's CPU per command").

Which parameter is which value is learnt from the translation itself: each parameter it
returned must be one of the filter's values, the very object, and one only; a
translation that changed a value (an ObjectId's hex normalised, a date to ISO text), or
left one out of its parameters (written into its SQL, or ignored), is not reused. A
translation that fell back to Python (``None``) is reused as such. Only filters of plain
fields, with the comparison operators Pingo uses and values of plain types, are shaped
at all; anything else (``$or``, ``$text``, a field named ``id``, which neosqlite
renames by its value's content, an embedded document, an ObjectId, a datetime, bytes)
is translated by neosqlite every time.

The cursor's translation also reads the catalogue (an equality on an indexed field is
written without the array test, to stay sargable), so its plans live in the
connection's ``Catalogue`` and are forgotten with it at any schema change
(``embedded_catalogue.py``); ``translate_match`` reads nothing but its filter and its
table's settings, which are part of its key. Both caches are bounded (emptied when full).
Imported by ``shared.store.embedded_server`` only, in the server's process.
"""

from __future__ import annotations

from typing import Any

from neosqlite.collection.datetime_utils import is_datetime_value
from neosqlite.collection.query_helper import utils as helper_utils
from neosqlite.collection.query_helper._sql_query_builder import SqlQueryBuilderMixin
from neosqlite.collection.sql_translator_unified import SQLTranslator
from neosqlite.collection.type_correction import _is_valid_objectid_hex

from shared.store.embedded_catalogue import catalogue_of
from shared.store.embedded_server import ID_COLUMN_SEEN

# The operators whose translation depends only on what ``shape`` keeps of their value.
OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$all", "$size"})
BOUND = 1024  # plans per cache; a full cache is emptied (Pingo uses a few dozen shapes)
# A list's length is part of its shape: longer lists (a page of ids) seldom repeat theirs.
LONGEST_LIST = 32
UNSHAPED = None  # a value not shaped

# A plan: the WHERE (or None: neosqlite falls back to Python); for each parameter the index
# of the filter's value it is; and the values that were one object when it was made.
Plan = tuple[str | None, tuple[int, ...], tuple[tuple[int, ...], ...]]
# Plans of translate_match, by the translator's settings and the filter's shape.
_matches: dict[tuple[Any, ...], Plan] = {}


def _value_key(value: Any, values: list[Any]) -> Any:
    """What the translation may branch on in a value (appending the value, which it may
    bind as a parameter, to ``values``), or UNSHAPED for a value not shaped at all."""
    kind = type(value)
    values.append(value)
    if kind is str:
        return ("s", is_datetime_value(value), _is_valid_objectid_hex(value))
    if kind is int or kind is float:
        return kind.__name__
    if kind is bool or value is None:
        return ("c", value)  # the value itself: true and false translate differently
    return UNSHAPED


def _list_key(items: list[Any], values: list[Any]) -> list[Any] | None:
    """Each item's ``_value_key``, or None for a list not shaped (too long, or holding a
    value not shaped)."""
    if len(items) > LONGEST_LIST:
        return None
    keys = [_value_key(item, values) for item in items]
    return None if UNSHAPED in keys else keys


def shape(query: Any) -> tuple[tuple[Any, ...], list[Any]] | None:
    """``query``'s shape and its values in order, or None if it is not shaped."""
    if type(query) is not dict:
        return None
    key: list[Any] = []
    values: list[Any] = []
    for field, condition in query.items():
        if type(field) is not str or field.startswith("$") or field == "id":
            return None
        if type(condition) is dict:
            ops: list[Any] = []
            for op, operand in condition.items():
                if op not in OPERATORS or (part := _operand_key(operand, values)) is None:
                    return None
                ops.append((op, *part))
            if not ops:
                return None
            key.append((field, "d", *ops))
        elif (part := _operand_key(condition, values)) is None:
            return None
        else:
            key.append((field, *part))
    return tuple(key), values


def _operand_key(operand: Any, values: list[Any]) -> tuple[Any, ...] | None:
    """A list's ``("l", *its items' keys)`` or a value's ``(its key,)``; None if not shaped."""
    if type(operand) is list:
        items = _list_key(operand, values)
        return None if items is None else ("l", *items)
    item = _value_key(operand, values)
    return None if item is UNSHAPED else (item,)


def plan_of(where: str | None, params: list[Any], values: list[Any]) -> Plan | None:
    """The plan of a translation of a filter with ``values``, or None if it cannot be
    reused: a parameter that is none of those values, or a value (other than a constant,
    ``None`` or a boolean, which are in the shape) that is not a parameter."""
    if where is None:
        return None, (), ()
    where_is: dict[int, list[int]] = {}  # each value object's places among the values
    for i, value in enumerate(values):
        where_is.setdefault(id(value), []).append(i)
    slots: list[int] = []
    alike: list[tuple[int, ...]] = []
    for param in params:
        found = tuple(where_is.get(id(param), ()))
        if not found:
            return None
        slots.append(found[0])
        if len(found) > 1:  # equal values, the same object: reused only while they are
            alike.append(found)
    used = set(slots).union(*alike)
    if any(i not in used and not _constant(value) for i, value in enumerate(values)):
        return None
    return where, tuple(slots), tuple(alike)


def _constant(value: Any) -> bool:
    return value is None or type(value) is bool


def _params(plan: Plan, values: list[Any]) -> list[Any] | None:
    """``plan``'s parameters from ``values``, or None if values it could not tell apart
    when it was made are now different objects."""
    for group in plan[2]:
        first = values[group[0]]
        if any(values[i] is not first for i in group):
            return None
    return [values[i] for i in plan[1]]


def _remember(cache: dict[Any, Plan], key: Any, plan: Plan | None) -> None:
    if plan is None:
        return
    if len(cache) >= BOUND:
        cache.clear()
    cache[key] = plan


def reuse_translations() -> None:
    """neosqlite's two filter translations, each reusing its plans as described above."""
    translate_match = SQLTranslator.translate_match
    build_where = SqlQueryBuilderMixin._build_simple_where_clause

    def translate_match_by_shape(
        self: SQLTranslator, match_spec: dict[str, Any], context: str = "direct"
    ) -> tuple[str | None, list[Any]]:
        shaped = shape(match_spec) if context == "direct" else None
        if shaped is None:
            return translate_match(self, match_spec, context)
        form, values = shaped
        key = (self.table_name, self.data_column, self.id_column, self.jsonb_supported, self._json_each_function, form)
        plan = _matches.get(key)
        params = None if plan is None else _params(plan, values)
        if plan is None or params is None:
            where, params = translate_match(self, match_spec, context)
            _remember(_matches, key, plan_of(where, params, values))
            return where, params
        return plan[0], params

    def build_where_by_shape(self: Any, query: dict[str, Any]) -> tuple[str, list[Any], list[str]] | None:
        collection = self.collection
        catalogue = catalogue_of(collection._database, collection.db)
        # The column of _id as remembered (embedded_server.remember_id_column): asking it
        # of a collection without a table yet would run SQL that neosqlite's path does not.
        id_column = collection.__dict__.get(ID_COLUMN_SEEN)
        if catalogue is None or id_column is None or helper_utils.get_force_fallback():
            return build_where(self, query)
        shaped = shape(query)
        if shaped is None:
            return build_where(self, query)
        form, values = shaped
        jsonb = self.jsonb
        key = (collection.name, id_column, jsonb.json_function_prefix, jsonb.json_each_function, form)
        plans = catalogue.plans
        plan = plans.get(key)
        params = None if plan is None else _params(plan, values)
        if plan is None or params is None:
            built = build_where(self, query)
            if built is None:
                _remember(plans, key, (None, (), ()))
            elif not built[2]:  # no temporary tables to clean up
                _remember(plans, key, plan_of(built[0], built[1], values))
            return built
        if plan[0] is None:
            return None
        return plan[0], params, []

    SQLTranslator.translate_match = translate_match_by_shape  # type: ignore[method-assign]
    SqlQueryBuilderMixin._build_simple_where_clause = build_where_by_shape  # type: ignore[method-assign]
