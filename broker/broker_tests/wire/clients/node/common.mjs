// What the client runners (kafkajs.mjs, platformatic.mjs) share: JSON lines out,
// the produce spec in, commands on stdin, the hang guard and the group member's loop
// of signals. Bytes travel as base64 both ways.

import { readFileSync } from 'node:fs'
import { createInterface } from 'node:readline'

/** One JSON line on stdout: what test_matrix_node.py reads. */
export function emit (event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n')
}

export const b64 = buffer => (buffer == null ? null : Buffer.from(buffer).toString('base64'))
export const unb64 = text => (text == null ? null : Buffer.from(text, 'base64'))

/**
 * The produce scenario's input, written by the test: {group, variants: [{topic,
 * acks, idempotent, codec, records: [{key, value, headers: [[name, value]]}]}]},
 * names as text, keys, values and header values base64; record i goes to
 * partition i % partitions.
 */
export function readSpec (path) {
  const spec = JSON.parse(readFileSync(path, 'utf8'))
  for (const variant of spec.variants) {
    variant.records = variant.records.map(r => ({
      key: unb64(r.key),
      value: unb64(r.value),
      headers: r.headers.map(([name, value]) => [name, unb64(value)])
    }))
  }
  return spec
}

/** [partition, offset] of each record of a send() of `count` records, record i to
 * partition i % partitions, from the base offset the broker answered for each
 * partition (a Map; a partition without one, as under acks=0, gets null offsets). */
export function placed (count, partitions, baseOffsets) {
  const rank = new Map()
  const out = []
  for (let i = 0; i < count; i++) {
    const p = i % partitions
    const r = rank.get(p) ?? 0
    rank.set(p, r + 1)
    const base = baseOffsets.get(p)
    out.push([p, base == null ? null : Number(base) + r])
  }
  return out
}

/** Exits 3 (with a line on stderr) if the scenario is still running after `ms`. */
export function hangGuard (ms, what) {
  const timer = setTimeout(() => {
    process.stderr.write(`${what}: still running after ${ms} ms\n`)
    process.exit(3)
  }, ms)
  timer.unref()
}

/** Calls `onLine` for each line on stdin (awaited one at a time). */
export function onStdinLines (onLine) {
  const lines = createInterface({ input: process.stdin })
  let chain = Promise.resolve()
  lines.on('line', line => {
    chain = chain.then(() => onLine(line)).catch(fail)
  })
}

/** Any error: on stderr, exit 1. */
export function fail (error) {
  process.stderr.write(`${error?.stack ?? error}\n`)
  if (error?.errors) process.stderr.write(`${JSON.stringify(error.errors, null, 1)}\n`)
  process.exit(1)
}

/**
 * A group member's life: `start()` joins; on SIGTERM `leave()` (LeaveGroup),
 * then the line {"event": "left"} and exit 0. SIGKILL gives it no chance to leave.
 * The end of stdin (the test is gone) ends it too, without leaving.
 */
export async function runMember (start, leave) {
  process.stdin.on('end', () => process.exit(4))
  process.stdin.resume()
  let leaving = false
  process.on('SIGTERM', () => {
    if (leaving) return
    leaving = true
    leave().then(() => {
      emit('left')
      process.exit(0)
    }, fail)
  })
  await start()
}

/** Prints {"event": "assigned", "partitions": [...]} when the assignment changes. */
export function assignmentReporter () {
  let shown = null
  return partitions => {
    const sorted = [...partitions].sort((a, b) => a - b)
    const key = sorted.join(',')
    if (key !== shown) {
      shown = key
      emit('assigned', { partitions: sorted })
    }
  }
}

/**
 * The admin scenario's line: the groups listed (id -> protocol type), the described
 * group's state, protocol type and member count, and its committed offsets (partition
 * -> offset).
 */
export function emitAdmin (listed, described, members, offsets) {
  emit('admin', {
    listed,
    state: described.state.toLowerCase(),
    protocol_type: described.protocolType,
    members,
    offsets
  })
}

export function main (scenarios) {
  const [scenario, ...args] = process.argv.slice(2)
  const run = scenarios[scenario]
  if (!run) fail(new Error(`unknown scenario ${scenario}; one of ${Object.keys(scenarios)}`))
  run(...args).catch(fail)
}
