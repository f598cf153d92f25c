// kafkajs 2.x against the wire broker, driven by test_matrix_node.py:
//
//   node kafkajs.mjs produce  BOOTSTRAP SPEC_PATH PARTITIONS
//   node kafkajs.mjs longpoll BOOTSTRAP TOPIC MAX_WAIT_MS MIN_BYTES
//   node kafkajs.mjs member   BOOTSTRAP GROUP TOPIC SESSION_MS
//   node kafkajs.mjs admin    BOOTSTRAP GROUP TOPIC
//
// Each prints JSON lines (common.mjs). kafkajs ships only gzip: snappy, lz4 and
// zstd need codec plug-ins, so the test asks for gzip alone. Its consumer always
// belongs to a group (no manual assignment), and it heartbeats between fetches only.
// KAFKAJS_DEBUG=1 in the environment: kafkajs's debug log on stderr.

import kafkajs from 'kafkajs'
import {
  assignmentReporter, b64, emit, emitAdmin, hangGuard, main, onStdinLines, placed, readSpec, runMember,
  unb64
} from './common.mjs'

const { Kafka, CompressionTypes, logLevel } = kafkajs

const CODECS = { none: CompressionTypes.None, gzip: CompressionTypes.GZIP }
const HEARTBEAT_MS = 300

function kafka (bootstrap) {
  return new Kafka({
    clientId: 'matrix-kafkajs',
    brokers: [bootstrap],
    logLevel: process.env.KAFKAJS_DEBUG ? logLevel.DEBUG : logLevel.ERROR,
    // its log lines go to stderr, never among the JSON lines
    logCreator: () => ({ namespace, level, log }) => {
      process.stderr.write(`kafkajs ${level} ${namespace}: ${JSON.stringify(log)}\n`)
    },
    retry: { initialRetryTime: 100, retries: 8 }
  })
}

function headersOf (pairs) {
  const headers = {}
  for (const [name, value] of pairs) headers[name] = value
  return headers
}

function readOf (topic, partition, message) {
  const headers = Object.entries(message.headers ?? {}).map(([k, v]) => [k, b64(v)])
  return {
    topic,
    partition,
    offset: Number(message.offset),
    key: b64(message.key),
    value: b64(message.value),
    headers
  }
}

/** Produces each variant in one send(), then reads every topic back from offset 0
 * with one group consumer. */
async function produce (bootstrap, specPath, partitionsText) {
  hangGuard(60_000, 'produce')
  const partitions = Number(partitionsText)
  const spec = readSpec(specPath)
  const client = kafka(bootstrap)
  for (const variant of spec.variants) {
    const producer = client.producer({
      idempotent: variant.idempotent,
      maxInFlightRequests: variant.idempotent ? 1 : undefined,
      allowAutoTopicCreation: true
    })
    await producer.connect()
    try {
      const metadata = await producer.send({
        topic: variant.topic,
        acks: variant.acks,
        compression: CODECS[variant.codec],
        messages: variant.records.map((r, i) => ({
          key: r.key, value: r.value, headers: headersOf(r.headers), partition: i % partitions
        }))
      })
      // acks=0: no answer, so no offsets
      const bases = new Map(metadata.map(m => [m.partition, m.baseOffset]))
      emit('produced', { topic: variant.topic, placed: placed(variant.records.length, partitions, bases) })
    } finally {
      await producer.disconnect()
    }
  }

  const expected = spec.variants.reduce((n, v) => n + v.records.length, 0)
  const consumer = client.consumer({
    groupId: spec.group,
    sessionTimeout: 10_000,
    heartbeatInterval: HEARTBEAT_MS,
    maxWaitTimeInMs: 100,
    allowAutoTopicCreation: false
  })
  await consumer.connect()
  let count = 0
  let resolve
  const done = new Promise(r => { resolve = r })
  await consumer.subscribe({ topics: spec.variants.map(v => v.topic), fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      emit('read', readOf(topic, partition, message))
      if (++count >= expected) resolve()
    }
  })
  await done
  await consumer.disconnect()
  emit('done')
}

/** A group consumer of TOPIC parks a fetch (MAX_WAIT_MS, MIN_BYTES); each line
 * on stdin is a base64 value that this process produces to partition 0 acks=all,
 * then prints {"event": "produced"}; each record read: {"event": "read", ...}. */
async function longpoll (bootstrap, topic, maxWaitText, minBytesText) {
  const client = kafka(bootstrap)
  const producer = client.producer({ allowAutoTopicCreation: false })
  await producer.connect()
  // kafkajs heartbeats only between fetches: the session outlasts the long poll
  const maxWait = Number(maxWaitText)
  const consumer = client.consumer({
    groupId: `${topic}-longpoll`,
    sessionTimeout: maxWait + 10_000,
    rebalanceTimeout: maxWait + 10_000,
    heartbeatInterval: HEARTBEAT_MS,
    maxWaitTimeInMs: maxWait,
    minBytes: Number(minBytesText),
    allowAutoTopicCreation: false
  })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  await consumer.run({
    autoCommit: false,
    eachMessage: async ({ topic, partition, message }) => {
      emit('read', readOf(topic, partition, message))
    }
  })
  onStdinLines(async line => {
    await producer.send({ topic, acks: -1, messages: [{ key: 'k', value: unb64(line), partition: 0 }] })
    emit('produced')
  })
  // stdin closed: the test is done; disconnect() would wait out the next parked fetch
  process.stdin.on('end', () => process.exit(0))
}

/** A group member: prints its assignment on each change, and each record it read
 * once the batch's offsets are committed ({"event": "consumed", partition, offset}). */
async function member (bootstrap, group, topic, sessionText) {
  const consumer = kafka(bootstrap).consumer({
    groupId: group,
    sessionTimeout: Number(sessionText),
    rebalanceTimeout: 10_000,
    heartbeatInterval: HEARTBEAT_MS,
    maxWaitTimeInMs: 100,
    metadataMaxAge: 1000,
    allowAutoTopicCreation: false
  })
  const report = assignmentReporter()
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    report(payload.memberAssignment[topic] ?? [])
  })
  await runMember(
    async () => {
      await consumer.connect()
      await consumer.subscribe({ topic, fromBeginning: true })
      await consumer.run({
        autoCommit: false,
        eachBatch: async ({ batch, heartbeat }) => {
          if (batch.messages.length === 0) return
          const last = batch.messages[batch.messages.length - 1]
          await consumer.commitOffsets([
            { topic, partition: batch.partition, offset: String(Number(last.offset) + 1) }
          ])
          for (const m of batch.messages) {
            emit('consumed', { partition: batch.partition, offset: Number(m.offset) })
          }
          await heartbeat()
        }
      })
    },
    () => consumer.disconnect()
  )
}

/** ListGroups, DescribeGroups of GROUP and its committed offsets of TOPIC. */
async function admin (bootstrap, group, topic) {
  hangGuard(30_000, 'admin')
  const client = kafka(bootstrap).admin()
  await client.connect()
  try {
    const { groups } = await client.listGroups()
    const listed = Object.fromEntries(groups.map(g => [g.groupId, g.protocolType]))
    const described = (await client.describeGroups([group])).groups
    if (described.length !== 1 || described[0].groupId !== group) throw new Error(JSON.stringify(described))
    const [d] = described
    const offsets = {}
    for (const t of await client.fetchOffsets({ groupId: group, topics: [topic] })) {
      for (const p of t.partitions) offsets[p.partition] = Number(p.offset)
    }
    emitAdmin(listed, d, d.members.length, offsets)
  } finally {
    await client.disconnect()
  }
}

main({ produce, longpoll, member, admin })
