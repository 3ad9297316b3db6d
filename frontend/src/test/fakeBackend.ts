// An in-memory stand-in for app/service in component tests: it keeps
// conversations like the store does, records every call, and lets a test
// push the events the service would send. The real service and both real
// transports are tested in Go (app/service) and in the browser end-to-end
// test (e2e/).

import { vi } from 'vitest';
import type { Backend, BackendEvent } from '../lib/backend';
import {
  AttachmentState,
  EventType,
  MessageStatus,
  type AppState,
  type DownloadState,
  type ModelChoice,
  type WelcomeInfo,
  type Attachment,
  type AttachmentView,
  type FitView,
  type ChatSettings,
  type Conversation,
  type Message,
  type SendRequest,
  type Settings,
  type UI,
} from '../lib/gen/service';

export function defaultSettings(): Settings {
  return {
    system_prompt: '',
    sampling_preset: 'auto',
    sampling: { temperature: 0.7, top_p: 0.8, top_k: 20, min_p: 0, presence_penalty: 1.5 },
    thinking: false,
    context_tokens: 0,
    parallel: 0,
    api_max_tokens: 0,
    api_port: 8080,
    api_lan: false,
    api_key: '',
    api_cors_origins: [],
    launch_at_login: false,
    keep_alive_minutes: 0,
    check_for_updates: true,
    global_shortcut: 'Option+Space',
    prefix_cache_gb: 0,
  };
}

export class FakeBackend implements Backend {
  handlers = new Set<(e: BackendEvent) => void>();
  conversations: Conversation[] = [];
  messages: Message[] = [];
  deleted = new Set<number>();
  settings = defaultSettings();
  /** What PrefixCache answers. */
  prefixCache = { available: true, dir: '/cache/suzuran/prefix', bytes: 300 << 20, snapshots: 3, limitBytes: 8 << 30 };
  /** Shortcuts SaveSettings refuses as macOS would when another app holds them. */
  refusedShortcuts = new Set<string>();
  nextID = 1;
  /** Attachments as the service holds them before a send, by id. */
  pending = new Map<string, AttachmentView>();
  /** The encoding each chip read again was asked to be read from. */
  rereadAs = new Map<string, string>();
  /** What CheckFit answers. */
  fit: FitView = {
    fits: true,
    message: 'fits',
    contextTokens: 4096,
    conversationTokens: 30,
    answerTokens: 1024,
    documentTokens: 50,
    availableTokens: 3042,
    overTokens: 0,
    noRoom: false,
  };
  state: AppState = {
    version: '1.2.3',
    model: {
      state: 'ready',
      name: 'Suzuran Tiny',
      dir: '/m',
      demo: true,
      progress: 1,
      error: '',
      backend: 'cpu',
      checking: false,
      fallback: '',
    },
    api: { available: true, enabled: false, url: '', lan: false, error: '' },
    settings: this.settings,
    showWelcome: false,
    shortcut: { available: false, error: '' },
  };

  emit(event: BackendEvent) {
    for (const h of this.handlers) h(event);
  }

  onEvent(handler: (e: BackendEvent) => void) {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  addConversation(title: string, texts: string[] = []): Conversation {
    const c: Conversation = {
      id: this.nextID++,
      title,
      createdAt: Date.now(),
      updatedAt: Date.now(),
      settings: { systemPrompt: '', thinking: '', samplingPreset: '' },
    };
    this.conversations.unshift(c);
    for (const t of texts) this.addMessage(c.id, 'user', t);
    return c;
  }

  /** The last message of each conversation's shown branch, by conversation id. */
  leaf = new Map<number, number>();

  addMessage(
    conversationId: number,
    role: string,
    content: string,
    status: string = MessageStatus.Complete,
    parentId: number | undefined = this.leaf.get(conversationId),
  ): Message {
    const m: Message = { id: this.nextID++, conversationId, role, content, reasoning: '', status, createdAt: Date.now() };
    if (parentId) m.parentId = parentId;
    this.messages.push(m);
    this.leaf.set(conversationId, m.id);
    return m;
  }

  /** The shown branch of a conversation, each message with its versions, as the store gives it. */
  branch(conversationId: number): Message[] {
    const all = this.messages.filter((m) => m.conversationId === conversationId);
    const out: Message[] = [];
    for (let m = all.find((x) => x.id === this.leaf.get(conversationId)); m; m = all.find((x) => x.id === m!.parentId)) {
      const versions = all.filter((x) => (x.parentId ?? 0) === (m!.parentId ?? 0)).map((x) => x.id);
      out.unshift(versions.length > 1 ? { ...m, versions } : { ...m });
    }
    return structuredClone(out);
  }

  ui: UI = {
    State: vi.fn(async () => ({ ...this.state, settings: this.settings })),
    Conversations: vi.fn(async (query: string) =>
      this.conversations
        .filter((c) => !this.deleted.has(c.id))
        .map((c) => {
          // Every branch is searched; the hit names its message.
          const hit = query ? this.messages.find((m) => m.conversationId === c.id && m.content.toLowerCase().includes(query.toLowerCase())) : undefined;
          return hit ? { ...c, matchId: hit.id, snippet: hit.content } : c;
        })
        .filter((c) => !query || c.title.toLowerCase().includes(query.toLowerCase()) || c.matchId),
    ),
    Conversation: vi.fn(async (id: number) => {
      const c = this.conversations.find((x) => x.id === id && !this.deleted.has(id));
      if (!c) throw new Error(`conversation ${id}: not found`);
      return { conversation: c, messages: this.branch(id) };
    }),
    ShowVersion: vi.fn(async (messageId: number) => {
      const m = this.messages.find((x) => x.id === messageId)!;
      let leaf = m.id;
      for (let child = this.messages.filter((x) => x.parentId === leaf).pop(); child; child = this.messages.filter((x) => x.parentId === leaf).pop()) {
        leaf = child.id;
      }
      this.leaf.set(m.conversationId, leaf);
      return this.ui.Conversation(m.conversationId);
    }),
    Export: vi.fn(async (id: number, format: string) => ({
      name: format === 'json' ? `chat-${id}.json` : `chat-${id}.md`,
      mime: format === 'json' ? 'application/json' : 'text/markdown',
      text: JSON.stringify(this.branch(id)),
    })),
    SaveExport: vi.fn(async () => ({ dialog: false, path: '' })),
    Import: vi.fn(async (text: string) => {
      let msgs: Message[];
      try {
        msgs = JSON.parse(text);
      } catch {
        throw new Error('this file cannot be imported: it is not valid JSON: choose a file made by Export as JSON');
      }
      const c = this.addConversation('Imported');
      for (const m of msgs) this.addMessage(c.id, m.role, m.content);
      return c;
    }),
    SetConversationSettings: vi.fn(async (id: number, settings: ChatSettings) => {
      const c = this.conversations.find((x) => x.id === id);
      if (!c) throw new Error(`conversation ${id}: not found`);
      if (!['', 'auto', 'thinking', 'non-thinking', 'coding', 'custom'].includes(settings.samplingPreset)) {
        throw new Error(`sampling preset "${settings.samplingPreset}": use auto, thinking, non-thinking, coding, custom, or nothing to follow Settings`);
      }
      c.settings = { ...settings };
      return { ...c, settings: { ...c.settings } };
    }),
    Rename: vi.fn(async (id: number, title: string) => {
      const c = this.conversations.find((x) => x.id === id);
      if (!c || !title.trim()) throw new Error('cannot rename');
      c.title = title.trim();
    }),
    Delete: vi.fn(async (id: number) => {
      this.deleted.add(id);
    }),
    Undelete: vi.fn(async (id: number) => {
      this.deleted.delete(id);
    }),
    Send: vi.fn(async (req) => {
      const attachments: Attachment[] = [];
      for (const id of req.attachments ?? []) {
        const view = this.pending.get(id);
        if (!view?.attachment) throw new Error(`attachment ${id} is not ready`);
        attachments.push(req.keep ? { ...view.attachment, kept: req.keep, originalTokens: view.attachment.tokens } : view.attachment);
        this.pending.delete(id);
      }
      if (!this.fit.fits && !req.keep && attachments.length) throw new Error(this.fit.message);
      const c = req.conversationId
        ? this.conversations.find((x) => x.id === req.conversationId)!
        : this.addConversation(req.text.slice(0, 48));
      const question = this.addMessage(c.id, 'user', req.text.trim());
      if (attachments.length) question.attachments = attachments;
      const reply = this.addMessage(c.id, 'assistant', '', MessageStatus.Streaming);
      return { conversation: c, question, reply: { ...reply } };
    }),
    Stop: vi.fn(async () => {}),
    Regenerate: vi.fn(async (conversationId: number) => {
      const q = this.branch(conversationId).filter((m) => m.role === 'user').pop()!;
      const reply = this.addMessage(conversationId, 'assistant', '', MessageStatus.Streaming, q.id);
      // As the service does: the new reply's event, without its versions.
      this.emit({ type: EventType.Message, conversationId, messageId: reply.id, message: { ...reply } });
      return { ...reply };
    }),
    Edit: vi.fn(async (messageId: number, text: string) => {
      const old = this.messages.find((m) => m.id === messageId)!;
      const c = this.conversations.find((x) => x.id === old.conversationId)!;
      const q = this.addMessage(c.id, 'user', text, MessageStatus.Complete, old.parentId ?? 0);
      if (!old.parentId) delete q.parentId;
      if (old.attachments) q.attachments = old.attachments;
      const reply = this.addMessage(c.id, 'assistant', '', MessageStatus.Streaming);
      return { conversation: c, question: { ...q }, reply };
    }),
    Continue: vi.fn(async (messageId: number) => {
      const m = this.messages.find((x) => x.id === messageId)!;
      m.status = MessageStatus.Streaming;
      return { ...m };
    }),
    Settings: vi.fn(async () => this.settings),
    SaveSettings: vi.fn(async (s: Settings) => {
      if (this.refusedShortcuts.has(s.global_shortcut)) {
        throw new Error(`${s.global_shortcut} is taken by another app or by macOS: choose another shortcut in Settings`);
      }
      for (const origin of s.api_cors_origins) {
        if (origin && !/^https?:\/\//.test(origin)) {
          throw new Error(`CORS origin "${origin}": write a scheme and host, such as http://localhost:3000`);
        }
      }
      // As the service does: origins trimmed, without a trailing slash.
      s = { ...s, api_cors_origins: s.api_cors_origins.map((o) => o.trim().replace(/\/+$/, '')).filter((o) => o) };
      this.settings = { ...s, api_key: s.api_lan && !s.api_key ? 'sk-suzuran-test' : s.api_key };
      return this.settings;
    }),
    SetAPIEnabled: vi.fn(async (on: boolean) => ({
      available: true,
      enabled: on,
      url: on ? 'http://127.0.0.1:8080' : '',
      lan: false,
      error: '',
    })),
    ReloadModel: vi.fn(async () => {}),
    RecheckGPU: vi.fn(async () => {}),
    PrefixCache: vi.fn(async () => ({ ...this.prefixCache })),
    ClearPrefixCache: vi.fn(async () => {
      this.prefixCache = { ...this.prefixCache, bytes: 0, snapshots: 0 };
      return { ...this.prefixCache };
    }),
    Report: vi.fn(async () => '{"schema": 1, "ok": false}\n'),
    DismissWelcome: vi.fn(async () => {
      this.state.showWelcome = false;
    }),
    Welcome: vi.fn(async () => structuredClone({ ...this.welcome, download: this.download })),
    Download: vi.fn(async () => ({ ...this.download })),
    StartDownload: vi.fn(async (repo: string) => {
      this.setDownload({ ...this.download, state: 'downloading', repo: repo || this.welcome.repo, error: '', errorKind: '' });
      return { ...this.download };
    }),
    PauseDownload: vi.fn(async () => {
      this.setDownload({ ...this.download, state: 'paused', line: 'Download paused' });
      return { ...this.download };
    }),
    Models: vi.fn(async () => structuredClone(this.models)),
    UseModel: vi.fn(async (dir: string) => {
      const c = this.models.find((m) => m.dir === dir || (m.demo && dir === ''));
      if (!c) throw new Error(`${dir}: config.json is missing; pick the folder that holds config.json`);
      if (!c.valid) throw new Error(`${dir} cannot be used: ${c.problem}`);
      for (const m of this.models) m.current = m === c;
      return { ...c };
    }),
    RemoveModel: vi.fn(async (dir: string) => {
      const c = this.models.find((m) => m.dir === dir);
      if (!c || c.demo || !c.removable) throw new Error(`${dir} is not one of the models Suzuran lists; nothing was removed`);
      if (c.current) for (const m of this.models) m.current = m.demo;
      this.models = this.models.filter((m) => m !== c);
      return { name: c.name, dir: c.dir, freed: c.frees };
    }),
    CanPickFolder: vi.fn(async () => false),
    PickFolder: vi.fn(async () => ''),
    AttachFiles: vi.fn(async (paths: string[]) => paths.map((p) => this.newAttachment(p.split('/').pop()!))),
    AttachData: vi.fn(async (name: string) => this.newAttachment(name)),
    ChooseFiles: vi.fn(async () => {
      throw new Error('this window has no file dialog: use the browser\'s file upload');
    }),
    RemoveAttachment: vi.fn(async (id: string) => {
      this.pending.delete(id);
    }),
    CheckFit: vi.fn(async () => this.fit),
    TextEncodings: vi.fn(async () => ['UTF-8', 'Shift_JIS', 'EUC-JP', 'GB18030', 'Big5', 'EUC-KR', 'Windows-1251']),
    RereadAttachment: vi.fn(async (id: string, encoding: string) => {
      const old = this.pending.get(id);
      if (!old) throw new Error(`attachment ${id} is gone (removed, or already sent): attach the file again`);
      this.pending.delete(id);
      const view = this.newAttachment(old.name);
      this.rereadAs.set(view.id, encoding);
      return view;
    }),
    // Words stand in for tokens; the context is the fit's.
    CountTokens: vi.fn(async (req: SendRequest) => {
      const tokens = req.text.split(/\s+/).filter(Boolean).length;
      const promptTokens = tokens + 10;
      const documentTokens = (req.attachments ?? []).reduce((n: number, id: string) => n + (this.pending.get(id)?.attachment?.tokens ?? 0), 0);
      const contextTokens = this.fit.contextTokens;
      return { ready: true, tokens, promptTokens, documentTokens, contextTokens, leftTokens: contextTokens - promptTokens - documentTokens };
    }),
  };

  /** What Welcome answers; the download starts idle. */
  welcome: WelcomeInfo = {
    repo: 'mlx-community/Qwen3.6-35B-A3B-4bit',
    size: 20_400_000_000,
    toDownload: 20_400_000_000,
    sizeText: '20.4 GB',
    toDownloadText: '20.4 GB',
    freeDisk: 120_000_000_000,
    freeDiskText: '120 GB',
    dir: '/Users/me/.cache/huggingface/hub/models--mlx-community--Qwen3.6-35B-A3B-4bit/snapshots/abc',
    cached: false,
    canRun: true,
    findings: [
      { check: 'processor', level: 'ok', message: 'This Mac has Apple silicon (Apple M3 Pro).' },
      { check: 'memory', level: 'warning', message: 'This Mac has 24 GB of memory: enough for the model, but little room is left.' },
      { check: 'disk', level: 'ok', message: 'The download needs 20.4 GB; the disk has 120 GB free.' },
    ],
    error: '',
    errorKind: '',
    estimated: false,
    download: {} as DownloadState,
  };
  download: DownloadState = {
    state: 'idle', repo: '', done: 0, total: 0, fraction: 0, filesDone: 0, filesTotal: 0,
    bytesPerSecond: 0, secondsLeft: -1, line: '', error: '', errorKind: '', dir: '',
  };
  models: ModelChoice[] = [
    { name: 'Suzuran Tiny', dir: '/m', source: 'demo', size: 0, demo: true, current: true, valid: true, problem: '', removable: false, frees: 0 },
  ];

  /** Changes the download and sends the event the service would. */
  setDownload(d: DownloadState) {
    this.download = d;
    this.emit({ type: EventType.Download, download: { ...d } });
  }


  private newAttachment(name: string): AttachmentView {
    const view: AttachmentView = { id: `a${this.nextID++}`, name, state: AttachmentState.Reading, stage: 'reading' };
    this.pending.set(view.id, view);
    return { ...view };
  }

  /** Ends the reading of an attachment as the service would: read, or failed. */
  finishAttachment(id: string, result: Attachment | string, encoding?: string) {
    const view = { ...this.pending.get(id)! };
    if (encoding) view.encoding = encoding;
    if (typeof result === 'string') {
      view.state = AttachmentState.Failed;
      view.error = result;
    } else {
      view.state = AttachmentState.Ready;
      view.attachment = result;
    }
    view.stage = undefined;
    this.pending.set(id, view);
    this.emit({ type: EventType.Attachment, attachment: view });
  }

  /** Streams text into a reply as the service would, then ends it. */
  stream(reply: Message, chunks: { content?: string; reasoning?: string }[], status: string = MessageStatus.Complete) {
    const stored = this.messages.find((m) => m.id === reply.id)!;
    for (const chunk of chunks) {
      this.emit({
        type: EventType.Reply,
        conversationId: reply.conversationId,
        messageId: reply.id,
        content: chunk.content,
        reasoning: chunk.reasoning,
        contentAt: stored.content.length,
        reasoningAt: stored.reasoning.length,
      });
      stored.content += chunk.content ?? '';
      stored.reasoning += chunk.reasoning ?? '';
    }
    if (status !== MessageStatus.Streaming) {
      stored.status = status;
      stored.stats = {
        promptTokens: 20,
        cachedTokens: 12,
        generatedTokens: 30,
        timeToFirstMs: 85,
        tokensPerSecond: 41.25,
        finishReason: 'stop',
        model: 'Suzuran Tiny',
      };
      if (stored.reasoning) stored.stats.thinkingMs = 3200;
      this.emit({ type: EventType.Message, conversationId: reply.conversationId, messageId: reply.id, message: { ...stored } });
    }
  }
}
