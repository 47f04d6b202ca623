/**
 * Whether two schemas describe the same columns: names, nullability and types.
 * arrow-js's `compareSchemas` also compares representation details that differ
 * between a schema built in memory and the same schema read back from IPC (field
 * metadata maps, a timezone of `undefined` vs `null`), so equal inputs were refused.
 * Schema-level and field-level metadata are ignored on purpose.
 */
export function sameSchema(a, b) {
    if (a === b)
        return true;
    if (a.fields.length !== b.fields.length)
        return false;
    return a.fields.every((field, i) => sameField(field, b.fields[i]));
}
function sameField(a, b) {
    return a.name === b.name && a.nullable === b.nullable && sameType(a.type, b.type);
}
/**
 * Same type id and the same parameters. arrow-js's toString names every
 * parameter of a flat type except a Decimal's bit width, compared on its own.
 */
function sameType(a, b) {
    if (a.typeId !== b.typeId || String(a) !== String(b))
        return false;
    if (a.bitWidth !== b.bitWidth)
        return false;
    const ac = a.children ?? [];
    const bc = b.children ?? [];
    return ac.length === bc.length && ac.every((child, i) => sameField(child, bc[i]));
}
