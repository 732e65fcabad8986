'use strict';
/*
 * ali-ons driver for rocketrio's end-to-end tests: one producer or one push consumer per process, steered by JSON
 * commands on stdin, reporting JSON events on stdout (one object per line; nothing else is written to stdout).
 *
 *   node agent.js producer --namesrv 127.0.0.1:9876 --group PG
 *     stdin  {"op":"produce","id":1,"messages":[{"topic","tags","keys","body","props":{...}}, ...]}
 *     stdout {"ev":"sent","key","ok":true,"msgId","queueId","queueOffset","status","sendTs"} per message
 *            (or "ok":false with "error"), then {"ev":"done","id":1,"ok":N,"failed":M}
 *   node agent.js consumer --namesrv 127.0.0.1:9876 --group CG --topic T [--instance NAME] [--slow-after N]
 *     stdout {"ev":"recv","topic","tags","keys","body","props","queueId","queueOffset","msgId","bornTs","recvTs",
 *            "reconsumeTimes"} per message the handler accepted
 *     stdin  {"op":"stop","id":2}: stop acknowledging (later deliveries are never acked, so they stay unconsumed),
 *            report {"ev":"closing","ts"}, close the consumer (which persists its offsets), answer
 *            {"ev":"done","id":2} and exit 0.
 *     --slow-after N: the handler takes 50 ms per message after N messages, so a consumer told to stop midway does
 *            stop midway.
 *     --fail-times N: the handler throws while a message's reconsumeTimes is below N (reported first, with
 *            "failed":true), so ali-ons sends it back (CONSUMER_SEND_MSG_BACK) and gets it again from the retry topic.
 *     --broadcast 1: ali-ons' isBroadcast with persistent (BROADCASTING: every consumer of the group gets every
 *            message, offsets kept in ~/.rocketmq_offsets_node/<clientId>/<group>/offsets.json); --home DIR sets
 *            HOME for that file.
 *   A message spec may carry "delayLevel" (ali-ons' Message#delayTimeLevel, the DELAY property).
 *   --access-key AK --secret-key SK (either role): ali-ons' accessKey/secretKey options, which sign every request
 *            for a broker with ACL on.
 *
 * Both emit {"ev":"ready"} once started and {"ev":"client_error","message","ts"} for errors the client reports.
 * stdin closing means stop. Every wait is bounded by the caller (pytest kills the process on its own timeout).
 */

const readline = require('readline');

// ali-ons reads HOME when it is loaded (its local offset store's directory), so --home must apply before require.
const homeAt = process.argv.indexOf('--home');
if (homeAt > 0 && homeAt + 1 < process.argv.length) process.env.HOME = process.argv[homeAt + 1];

const { Producer, Consumer, Message } = require('ali-ons');

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// ali-ons logs through options.logger; keep stdout for JSON events only.
const logger = {
  debug() {},
  info() {},
  warn(...args) { console.error('[ali-ons warn]', ...args); },
  error(...args) { console.error('[ali-ons error]', ...args); },
};

// ali-ons asserts an httpclient even when nameSrv is given; it is only used to look up an ONS address server.
const httpclient = { request: async () => { throw new Error('no http in e2e tests'); } };

function parseArgs(argv) {
  const role = argv[0];
  const opts = {};
  for (let i = 1; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || i + 1 >= argv.length) {
      throw new Error(`bad argument ${argv[i]}; expected --name value`);
    }
    opts[argv[i].slice(2)] = argv[i + 1];
  }
  return { role, opts };
}

// ACL: ali-ons signs every request when both keys are set.
function credentials(opts) {
  return opts['access-key'] ? { accessKey: opts['access-key'], secretKey: opts['secret-key'] } : {};
}

const BUILTIN_PROPS = new Set(['KEYS', 'TAGS']);

function describeReceived(msg) {
  const props = {};
  for (const [k, v] of Object.entries(msg.properties || {})) {
    if (!BUILTIN_PROPS.has(k)) props[k] = v;
  }
  return {
    ev: 'recv',
    topic: msg.topic,
    tags: msg.tags === undefined ? null : msg.tags,
    keys: msg.keys === undefined ? null : msg.keys,
    body: msg.body ? msg.body.toString('utf8') : '',
    props,
    queueId: msg.queueId,
    queueOffset: Number(msg.queueOffset),
    msgId: msg.msgId,
    bornTs: Number(msg.bornTimestamp),
    recvTs: Date.now(),
    reconsumeTimes: msg.reconsumeTimes,
    storeTs: Number(msg.storeTimestamp),
  };
}

async function runProducer(opts, commands) {
  const producer = new Producer({
    httpclient,
    logger,
    nameSrv: opts.namesrv,
    producerGroup: opts.group,
    // No client-side retry: every first attempt must succeed, so a broker hiccup cannot hide behind a retry.
    retryTimesWhenSendFailed: 0,
    ...credentials(opts),
  });
  producer.on('error', err => emit({ ev: 'client_error', message: String(err && err.message), ts: Date.now() }));
  await producer.ready();
  emit({ ev: 'ready' });
  for await (const cmd of commands) {
    if (cmd.op === 'produce') {
      let ok = 0;
      let failed = 0;
      for (const spec of cmd.messages) {
        const msg = new Message(spec.topic, spec.tags, spec.body);
        if (spec.keys) msg.keys = [spec.keys];
        for (const [k, v] of Object.entries(spec.props || {})) msg.properties[k] = v;
        if (spec.delayLevel) msg.delayTimeLevel = Number(spec.delayLevel);
        const sendTs = Date.now();
        try {
          const res = await producer.send(msg);
          const good = res.sendStatus === 'SEND_OK';
          if (good) ok++; else failed++;
          emit({
            ev: 'sent', key: spec.keys, ok: good, status: res.sendStatus, msgId: res.msgId,
            queueId: res.messageQueue && Number(res.messageQueue.queueId), queueOffset: res.queueOffset, sendTs,
          });
        } catch (err) {
          failed++;
          emit({ ev: 'sent', key: spec.keys, ok: false, error: String(err && err.message), sendTs });
        }
      }
      emit({ ev: 'done', id: cmd.id, ok, failed });
    } else if (cmd.op === 'stop') {
      await producer.close();
      emit({ ev: 'done', id: cmd.id });
      return;
    } else {
      emit({ ev: 'error', id: cmd.id, error: `unknown op ${cmd.op}` });
    }
  }
  await producer.close();
}

async function runConsumer(opts, commands) {
  const options = {
    httpclient,
    logger,
    nameSrv: opts.namesrv,
    consumerGroup: opts.group,
    ...credentials(opts),
  };
  // Two consumers of one group in one host need distinct client ids; ali-ons uses the PID unless told otherwise.
  if (opts.instance) options.instanceName = opts.instance;
  // persistent: the local file store (without it ali-ons keeps a broadcasting consumer's offsets in memory only).
  if (opts.broadcast === '1') Object.assign(options, { isBroadcast: true, persistent: true });
  const consumer = new Consumer(options);
  consumer.on('error', err => emit({ ev: 'client_error', message: String(err && err.message), ts: Date.now() }));
  let stopping = false;
  let accepted = 0;
  const slowAfter = Number(opts['slow-after'] || 0);
  const failTimes = Number(opts['fail-times'] || 0);
  consumer.subscribe(opts.topic, '*', async msg => {
    if (msg.reconsumeTimes < failTimes) {
      emit({ ...describeReceived(msg), failed: true });
      throw new Error(`failing on purpose (reconsumeTimes ${msg.reconsumeTimes} < ${failTimes})`);
    }
    accepted++;
    if (slowAfter && accepted > slowAfter) await new Promise(resolve => setTimeout(resolve, 50));
    if (stopping) {
      // Never settle: an unacknowledged message keeps its queue's offset below it, so a successor receives it.
      await new Promise(() => {});
    }
    emit(describeReceived(msg));
  });
  await consumer.ready();
  emit({ ev: 'ready' });
  for await (const cmd of commands) {
    if (cmd.op === 'stop') {
      stopping = true;
      emit({ ev: 'closing', ts: Date.now() });
      await consumer.close();
      emit({ ev: 'done', id: cmd.id });
      return;
    }
    emit({ ev: 'error', id: cmd.id, error: `unknown op ${cmd.op}` });
  }
  stopping = true;
  await consumer.close();
}

async function* readCommands() {
  const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of rl) {
    if (line.trim()) yield JSON.parse(line);
  }
}

async function main() {
  const { role, opts } = parseArgs(process.argv.slice(2));
  const commands = readCommands();
  if (role === 'producer') {
    await runProducer(opts, commands);
  } else if (role === 'consumer') {
    await runConsumer(opts, commands);
  } else {
    throw new Error(`unknown role ${role}; expected producer or consumer`);
  }
}

main().then(
  () => process.exit(0),
  err => {
    emit({ ev: 'fatal', message: String(err && err.stack) });
    process.exit(1);
  },
);
