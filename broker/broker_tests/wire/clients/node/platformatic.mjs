// @platformatic/kafka (1.x or 2.x, the package name to load is the first argument)
// against the wire broker, driven by test_matrix_node.py:
//
//   node platformatic.mjs MODULE produce  BOOTSTRAP SPEC_PATH PARTITIONS
//   node platformatic.mjs MODULE longpoll BOOTSTRAP TOPIC MAX_WAIT_MS MIN_BYTES
//   node platformatic.mjs MODULE member   BOOTSTRAP GROUP TOPIC SESSION_MS
//   node platformatic.mjs MODULE admin    BOOTSTRAP GROUP TOPIC
//
// Each prints JSON lines (common.mjs). Codecs: gzip, snappy and lz4 built in; zstd
// only where node:zlib has it (Node.js 22.15+), so not on Node.js 20. Its consumer
// always belongs to a group; the long poll uses the low-level Consumer.fetch, which
// names the topic by its id (Fetch v13+).
//
// 2.x declares Node.js >= 22.22 and calls Promise.withResolvers (Node.js 22+) for
// every promise it returns; on older Node.js this file supplies that one function
// (the same few lines as 1.x's own fallback) before loading the client.

import {
  assignmentReporter, b64, emit, emitAdmin, hangGuard, main, onStdinLines, placed, readSpec, runMember,
  unb64
} from './common.mjs'

if (typeof Promise.withResolvers !== 'function') {
  Promise.withResolvers = function withResolvers () {
    let resolve, reject
    const promise = new this((res, rej) => { resolve = res; reject = rej })
    return { promise, resolve, reject }
  }
}

const [moduleName, ...rest] = process.argv.slice(2)
process.argv.splice(2, process.argv.length, ...rest)
const { Admin, Consumer, Producer } = await import(moduleName)

const HEARTBEAT_MS = 300
const OPTIONS = { clientId: 'matrix-platformatic', retries: 8, retryDelay: 100 }

function readOf (message) {
  return {
    topic: message.topic,
    partition: message.partition,
    offset: Number(message.offset),
    key: b64(message.key),
    value: b64(message.value),
    // 1.x: a Map only (insertion order); 2.x also headerEntries (repeated names kept)
    headers: (message.headerEntries ?? [...message.headers]).map(([k, v]) => [k.toString(), b64(v)])
  }
}

/** Produces each variant in one send(), then reads every topic back from offset 0
 * with one group consumer. */
async function produce (bootstrap, specPath, partitionsText) {
  hangGuard(60_000, 'produce')
  const partitions = Number(partitionsText)
  const spec = readSpec(specPath)
  for (const variant of spec.variants) {
    const producer = new Producer({
      ...OPTIONS,
      bootstrapBrokers: [bootstrap],
      idempotent: variant.idempotent,
      autocreateTopics: true
    })
    try {
      const result = await producer.send({
        acks: variant.acks,
        compression: variant.codec,
        messages: variant.records.map((r, i) => ({
          topic: variant.topic,
          key: r.key,
          value: r.value,
          headers: new Map(r.headers.map(([k, v]) => [Buffer.from(k), v])),
          partition: i % partitions
        }))
      })
      // acks=0: no answer, so no offsets
      const bases = new Map((result.offsets ?? []).map(o => [o.partition, o.offset]))
      emit('produced', { topic: variant.topic, placed: placed(variant.records.length, partitions, bases) })
    } finally {
      await producer.close()
    }
  }

  const expected = spec.variants.reduce((n, v) => n + v.records.length, 0)
  const consumer = new Consumer({
    ...OPTIONS,
    bootstrapBrokers: [bootstrap],
    groupId: spec.group,
    sessionTimeout: 10_000,
    rebalanceTimeout: 10_000,
    heartbeatInterval: HEARTBEAT_MS,
    maxWaitTime: 100
  })
  const stream = await consumer.consume({
    topics: spec.variants.map(v => v.topic),
    mode: 'earliest',
    autocommit: false
  })
  let count = 0
  for await (const message of stream) {
    emit('read', readOf(message))
    if (++count >= expected) break
  }
  await consumer.close(true)
  emit('done')
}

/** A low-level fetch of TOPIC partition 0 from offset 0 parks (MAX_WAIT_MS,
 * MIN_BYTES), then fetches on from the next offset; each line on stdin is a
 * base64 value that this process produces to partition 0 acks=all, then prints
 * {"event": "produced"}; each record read: {"event": "read", ...}. */
async function longpoll (bootstrap, topic, maxWaitText, minBytesText) {
  const producer = new Producer({ ...OPTIONS, bootstrapBrokers: [bootstrap] })
  const maxWait = Number(maxWaitText)
  const consumer = new Consumer({
    ...OPTIONS,
    bootstrapBrokers: [bootstrap],
    groupId: `${topic}-longpoll`,
    requestTimeout: maxWait + 10_000 // outlasts the parked fetch
  })
  const metadata = await consumer.metadata({ topics: [topic] })
  const topicId = metadata.topics.get(topic).id
  const leader = metadata.topics.get(topic).partitions[0].leader
  onStdinLines(async line => {
    await producer.send({ acks: -1, messages: [{ topic, key: Buffer.from('k'), value: unb64(line), partition: 0 }] })
    emit('produced')
  })
  // stdin closed: the test is done; close() would wait out the next parked fetch
  process.stdin.on('end', () => process.exit(0))
  let offset = 0n
  while (true) {
    const response = await consumer.fetch({
      node: leader,
      maxWaitTime: maxWait,
      minBytes: Number(minBytesText),
      topics: [{
        topicId,
        partitions: [{
          partition: 0,
          currentLeaderEpoch: -1,
          fetchOffset: offset,
          lastFetchedEpoch: -1,
          partitionMaxBytes: 1_048_576
        }]
      }]
    })
    for (const t of response.responses) {
      for (const p of t.partitions) {
        if (p.errorCode !== 0) throw new Error(`fetch error ${p.errorCode}`)
        for (const batch of p.records ?? []) {
          for (const record of batch.records) {
            const at = batch.firstOffset + BigInt(record.offsetDelta)
            if (at < offset) continue
            emit('read', {
              topic,
              partition: p.partitionIndex,
              offset: Number(at),
              key: b64(record.key),
              value: b64(record.value),
              headers: []
            })
            offset = at + 1n
          }
        }
      }
    }
  }
}

/** A group member: prints its assignment on each change, and each record it read
 * once its offset is committed ({"event": "consumed", partition, offset}). */
async function member (bootstrap, group, topic, sessionText) {
  const consumer = new Consumer({
    ...OPTIONS,
    bootstrapBrokers: [bootstrap],
    groupId: group,
    sessionTimeout: Number(sessionText),
    rebalanceTimeout: 10_000,
    heartbeatInterval: HEARTBEAT_MS,
    maxWaitTime: 100,
    metadataMaxAge: 1000
  })
  const report = assignmentReporter()
  consumer.on('consumer:group:join', ({ assignments }) => {
    report((assignments ?? []).filter(a => a.topic === topic).flatMap(a => a.partitions))
  })
  await runMember(
    async () => {
      const stream = await consumer.consume({
        topics: [topic],
        mode: 'committed',
        fallbackMode: 'earliest',
        autocommit: false
      })
      for await (const message of stream) {
        await message.commit()
        emit('consumed', { partition: message.partition, offset: Number(message.offset) })
      }
    },
    () => consumer.close(true)
  )
}

/** ListGroups, DescribeGroups of GROUP and its committed offsets of TOPIC. */
async function admin (bootstrap, group, topic) {
  hangGuard(30_000, 'admin')
  const client = new Admin({ ...OPTIONS, bootstrapBrokers: [bootstrap] })
  try {
    const listed = {}
    for (const [id, g] of await client.listGroups()) listed[id] = g.protocolType
    const described = await client.describeGroups({ groups: [group] })
    const d = described.get(group)
    const offsets = {}
    const [committed] = await client.listConsumerGroupOffsets({ groups: [group] })
    for (const t of committed.topics) {
      if (t.name !== topic) continue
      for (const p of t.partitions) offsets[p.partitionIndex] = Number(p.committedOffset)
    }
    emitAdmin(listed, d, d.members.size, offsets)
  } finally {
    await client.close()
  }
}

main({ produce, longpoll, member, admin })
