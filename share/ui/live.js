// The live set of the tenant's sandboxes, shared by the views: the list
// from GET /v1/sandboxes, kept current by the event stream
// (GET /v1/events?follow=1, NDJSON, read with fetch so the key goes in a
// header), or by polling the list every few seconds where the server has
// no event stream. CPU and memory are polled in bulk, every running
// sandbox's newest sample in one request (GET /v1/sandboxes/metrics), and
// kept as short series.

import { api, ndjson, ApiError } from './api.js';
import { showError } from './dom.js';

const POLL_MS = 3000;
const METRICS_MS = 4000;
const SERIES = 60; // points kept per sandbox
// The events after which a sandbox is no more. Not sandbox.timed_out: one
// that pauses at its timeout lives on (sandbox.paused follows); one that
// ends there is sandbox.killed next.
const GONE = new Set(['sandbox.killed', 'sandbox.lost']);

export class Live {
  constructor() {
    this.sandboxes = new Map(); // id → the API's sandbox object
    this.series = new Map(); // id → {cpu: [pct], mem: [fraction]}
    this.listeners = new Set();
    this.mode = 'starting'; // 'events' | 'polling'
    this.seq = null;
    this.abort = new AbortController();
    this.refreshTimer = null;
  }

  // fn(live) after each change; returns the function that stops it.
  subscribe(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  changed() {
    for (const fn of this.listeners) fn(this);
  }

  async start() {
    await this.refresh();
    this.follow();
    this.metricsLoop();
  }

  stop() {
    this.abort.abort();
    clearTimeout(this.refreshTimer);
  }

  async refresh() {
    try {
      const r = await api('GET', '/v1/sandboxes', { signal: this.abort.signal });
      const next = new Map();
      for (const s of r.sandboxes) next.set(s.id, s);
      this.sandboxes = next;
      for (const id of this.series.keys()) if (!next.has(id)) this.series.delete(id);
      this.changed();
    } catch (e) {
      if (e.name !== 'AbortError') showError(e);
    }
  }

  // One list refresh soon, however many events ask for one.
  refreshSoon(ms = 1000) {
    if (this.refreshTimer) return;
    this.refreshTimer = setTimeout(() => {
      this.refreshTimer = null;
      this.refresh();
    }, ms);
  }

  async follow() {
    while (!this.abort.signal.aborted) {
      const since = this.seq === null ? '' : `&since=${this.seq}`;
      let r;
      try {
        r = await api('GET', `/v1/events?follow=1&type=sandbox.*${since}`,
          { raw: true, signal: this.abort.signal, headers: { Accept: 'application/x-ndjson' } });
      } catch (e) {
        if (e.name === 'AbortError') return;
        if (e instanceof ApiError && (e.status === 404 || e.status === 405)) return this.poll();
        showError(e);
        await sleep(POLL_MS, this.abort.signal);
        continue;
      }
      this.mode = 'events';
      this.changed();
      try {
        for await (const ev of ndjson(r)) this.apply(ev);
      } catch (e) {
        if (e.name === 'AbortError') return;
      }
      await sleep(1000, this.abort.signal); // the stream ended: follow again from seq
    }
  }

  async poll() {
    this.mode = 'polling';
    this.changed();
    while (!this.abort.signal.aborted) {
      await sleep(POLL_MS, this.abort.signal);
      await this.refresh();
    }
  }

  // One event into the set: a sandbox gone is dropped at once; what else
  // changed is read back from the list, once for many events.
  apply(ev) {
    if (typeof ev.seq === 'number') this.seq = ev.seq;
    if (!ev.type || !ev.type.startsWith('sandbox.')) {
      if (ev.type === 'events.gap') this.refreshSoon(0);
      return;
    }
    const s = this.sandboxes.get(ev.sandbox);
    if (GONE.has(ev.type)) {
      if (this.sandboxes.delete(ev.sandbox)) this.series.delete(ev.sandbox), this.changed();
      return;
    }
    if (ev.type === 'sandbox.paused' && s) s.state = 'paused';
    else if (ev.type === 'sandbox.resumed' && s) s.state = 'running';
    else if (!s && ev.sandbox) {
      const d = ev.data || {};
      this.sandboxes.set(ev.sandbox, {
        id: ev.sandbox, state: 'running', template: d.template, isolation: d.tier,
        created_at: ev.time, metadata: d.metadata,
      });
    }
    this.changed();
    this.refreshSoon();
  }

  async metricsLoop() {
    while (!this.abort.signal.aborted) {
      await this.metricsOnce();
      await sleep(METRICS_MS, this.abort.signal);
    }
  }

  async metricsOnce() {
    let r;
    try {
      r = await api('GET', '/v1/sandboxes/metrics', { signal: this.abort.signal });
    } catch (e) {
      if (e.name !== 'AbortError') showError(e);
      return;
    }
    for (const [id, m] of Object.entries(r.sandboxes)) {
      const s = this.series.get(id) || { cpu: [], mem: [], at: null };
      if (s.at === m.time) continue; // the same sample as last time
      s.at = m.time;
      s.cpu.push(m.cpu_pct || 0);
      s.mem.push(m.memory_limit_bytes ? m.memory_used_bytes / m.memory_limit_bytes : 0);
      if (s.cpu.length > SERIES) s.cpu.shift(), s.mem.shift();
      this.series.set(id, s);
    }
    this.changed();
  }
}

function sleep(ms, signal) {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    }, { once: true });
  });
}
