// The window's state and what the user can do with it. Components read the
// fields (Svelte 5 runes make them reactive) and call the methods; events
// from the service keep everything current, a reply's text arriving in
// batches of about 30 ms.

import type { Backend, BackendEvent } from './backend';
import { Attachments } from './attachments.svelte';
import {
  EventType,
  MessageStatus,
  type APIState,
  type ChatSettings,
  type DownloadState,
  type Conversation,
  type ExportFile,
  type Event,
  type Message,
  type ModelState,
  type SendRequest,
  type Settings,
  type ShortcutState,
} from './gen/service';

/** The main views of the window. */
export type View = 'chat' | 'settings' | 'welcome';

export class ChatState {
  version = $state('');
  model: ModelState | null = $state(null);
  api: APIState | null = $state(null);
  settings: Settings | null = $state(null);
  /** Whether the global shortcut exists here (the macOS app) and why the saved one was refused. */
  shortcut: ShortcutState | null = $state(null);
  /** The model download (welcome view, demo banner); null until the first event. */
  download: DownloadState | null = $state(null);
  conversations: Conversation[] = $state([]);
  query = $state('');
  current: Conversation | null = $state(null);
  messages: Message[] = $state([]);
  /** The reply whose prompt is being read: its length and how much is read, in tokens. */
  prefill: { messageId: number; tokens: number; done: number } | null = $state(null);
  think = $state(true);
  view: View = $state('chat');
  /** The last error, shown until dismissed. */
  error = $state('');
  /** The conversation just deleted, while Undo is offered. */
  deleted: Conversation | null = $state(null);
  /** The documents attached to the question being written. */
  readonly attachments = new Attachments(() => this.ui);

  readonly streaming = $derived(this.messages.some((m) => m.status === MessageStatus.Streaming));

  private stopEvents: (() => void) | undefined;
  private undoTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(private backend: Backend) {}

  get ui() {
    return this.backend.ui;
  }

  /** Loads the state and starts following events. */
  async start(): Promise<void> {
    this.stopEvents = this.backend.onEvent((event) => this.handle(event));
    await this.guard(async () => {
      const state = await this.ui.State();
      this.version = state.version;
      this.model = state.model;
      this.api = state.api;
      this.settings = state.settings;
      this.shortcut = state.shortcut;
      this.think = state.settings.thinking;
      // The first run on the demo model opens the welcome view by itself.
      if (state.showWelcome) this.view = 'welcome';
      await this.refreshList();
    });
  }

  /** Reads the shortcut's state again: the desktop takes the shortcut a moment after the window opens. */
  async refreshShortcut(): Promise<void> {
    await this.guard(async () => {
      this.shortcut = (await this.ui.State()).shortcut;
    });
  }

  private welcomeDismissed = false;

  /** Records that the user left the welcome view, so that it no longer opens by itself. */
  async dismissWelcome(): Promise<void> {
    if (this.welcomeDismissed) return;
    this.welcomeDismissed = true;
    await this.guard(() => this.ui.DismissWelcome());
  }

  stop(): void {
    this.stopEvents?.();
  }

  /** Runs an action, showing its error instead of throwing it. */
  private async guard<T>(action: () => Promise<T>): Promise<T | undefined> {
    try {
      return await action();
    } catch (e) {
      this.error = e instanceof Error ? e.message : String(e);
      return undefined;
    }
  }

  async refreshList(): Promise<void> {
    this.conversations = await this.ui.Conversations(this.query);
  }

  async search(query: string): Promise<void> {
    this.query = query;
    await this.guard(() => this.refreshList());
  }

  /**
   * Opens a conversation; with match (a search hit's message), on the
   * branch that holds it when another one is shown.
   */
  async open(id: number, match = 0): Promise<void> {
    await this.guard(async () => {
      let view = await this.ui.Conversation(id);
      if (match && !view.messages.some((m) => m.id === match)) view = await this.ui.ShowVersion(match);
      this.current = view.conversation;
      this.messages = view.messages;
      this.think = thinkOf(view.conversation, this.settings?.thinking ?? this.think);
      this.view = 'chat';
      this.exported = '';
    });
  }

  /**
   * Asks, before the view is left, whether to keep unsaved changes: the
   * Settings view sets it while it is open, taking the action to run once
   * the user answers and returning true when it asks.
   */
  leaveGuard: ((action: () => void) => boolean) | null = null;

  /** Runs an action that leaves the view (New chat, Settings from the tray or a shortcut) through leaveGuard. */
  leave(action: () => void): void {
    if (!this.leaveGuard?.(action)) action();
  }

  newChat(): void {
    this.current = null;
    if (this.settings) this.think = this.settings.thinking;
    this.exported = '';
    this.messages = [];
    this.prefill = null;
    this.view = 'chat';
  }

  /**
   * Sends a question with the attached documents. Documents that do not fit
   * the context are not sent: attachments.pendingFit asks the user, whose
   * choice comes back here as keep ('beginning' or 'end').
   */
  async send(text: string, keep = ''): Promise<boolean> {
    const ids = this.attachments.ids();
    const req: SendRequest = { conversationId: this.current?.id ?? 0, text, think: this.think };
    if (ids.length > 0) Object.assign(req, { attachments: ids, keep });
    this.attachments.pendingFit = null;
    if (ids.length > 0 && !keep) {
      const fit = await this.guard(() => this.ui.CheckFit(req));
      if (!fit) return false;
      if (!fit.fits) {
        this.attachments.pendingFit = { fit, text };
        return false;
      }
    }
    const result = await this.guard(() => this.ui.Send(req));
    if (!result) return false;
    this.attachments.clear();
    if (this.current?.id !== result.conversation.id) {
      this.current = result.conversation;
      this.messages = [];
    }
    this.upsert(result.question);
    this.upsert(result.reply);
    // Events for a new conversation may have come before its id was known.
    await this.reloadCurrent();
    return true;
  }

  async stopReply(): Promise<void> {
    if (this.current) {
      const id = this.current.id;
      await this.guard(() => this.ui.Stop(id));
    }
  }

  async regenerate(): Promise<void> {
    if (!this.current) return;
    const id = this.current.id;
    const reply = await this.guard(() => this.ui.Regenerate(id, this.think));
    if (reply) await this.reloadCurrent();
  }

  async edit(messageId: number, text: string): Promise<boolean> {
    const result = await this.guard(() => this.ui.Edit(messageId, text, this.think));
    if (result) await this.reloadCurrent();
    return result !== undefined;
  }

  /**
   * Shows another version of a message (an answer regenerated, a question
   * edited) and the branch that follows it; the next question goes on from
   * there.
   */
  async showVersion(messageId: number): Promise<void> {
    const id = this.current?.id;
    const view = await this.guard(() => this.ui.ShowVersion(messageId));
    if (view && this.current?.id === id) this.messages = view.messages;
  }

  /** What the window says after an export: where the file went. */
  exported = $state('');

  /**
   * Exports the open conversation: into a file chosen in the desktop's save
   * dialog, or, in a browser, as a download.
   */
  async exportCurrent(format: 'markdown' | 'json', download: (file: ExportFile) => void = downloadFile): Promise<void> {
    if (!this.current) return;
    const id = this.current.id;
    this.exported = '';
    await this.guard(async () => {
      const saved = await this.ui.SaveExport(id, format);
      if (saved.dialog) {
        if (saved.path) this.exported = `Saved to ${saved.path}`;
        return;
      }
      const file = await this.ui.Export(id, format);
      download(file);
      this.exported = `Downloaded ${file.name}`;
    });
  }

  /** Imports a conversation from the text of an exported JSON file and opens it. */
  async importText(text: string): Promise<boolean> {
    const c = await this.guard(() => this.ui.Import(text));
    if (!c) return false;
    await this.guard(() => this.refreshList());
    await this.open(c.id);
    return true;
  }

  async continueReply(messageId: number): Promise<void> {
    const reply = await this.guard(() => this.ui.Continue(messageId));
    if (reply) await this.reloadCurrent();
  }

  async rename(id: number, title: string): Promise<void> {
    await this.guard(async () => {
      await this.ui.Rename(id, title);
      if (this.current?.id === id) this.current = { ...this.current, title: title.trim() };
      await this.refreshList();
    });
  }

  /** Deletes a conversation, offering Undo for 8 seconds. */
  async remove(conversation: Conversation): Promise<void> {
    await this.guard(async () => {
      await this.ui.Delete(conversation.id);
      if (this.current?.id === conversation.id) this.newChat();
      this.deleted = conversation;
      clearTimeout(this.undoTimer);
      this.undoTimer = setTimeout(() => (this.deleted = null), 8000);
      await this.refreshList();
    });
  }

  async undoDelete(): Promise<void> {
    const c = this.deleted;
    if (!c) return;
    this.deleted = null;
    clearTimeout(this.undoTimer);
    await this.guard(async () => {
      await this.ui.Undelete(c.id);
      await this.refreshList();
    });
  }

  async setThink(on: boolean): Promise<void> {
    this.think = on;
    // An open conversation keeps the switch's position as its own; the
    // app's is the default for new chats.
    const c = this.current;
    if (c && c.settings.thinking !== (on ? 'on' : 'off')) {
      await this.setConversationSettings({ ...c.settings, thinking: on ? 'on' : 'off' });
    }
    if (this.settings && this.settings.thinking !== on) {
      const saved = await this.guard(() => this.ui.SaveSettings({ ...this.settings!, thinking: on }));
      if (saved) this.settings = saved;
    }
  }

  /**
   * Stores the open conversation's own settings ("" fields follow the
   * app's); returns the error in words, "" when saved.
   */
  async setConversationSettings(next: ChatSettings): Promise<string> {
    const c = this.current;
    if (!c) return 'Send a first message: the settings are kept with the conversation.';
    try {
      const saved = await this.ui.SetConversationSettings(c.id, next);
      if (this.current?.id === saved.id) {
        this.current = { ...this.current, settings: saved.settings };
        this.think = thinkOf(saved, this.settings?.thinking ?? this.think);
      }
      return '';
    } catch (e) {
      return e instanceof Error ? e.message : String(e);
    }
  }

  async saveSettings(next: Settings): Promise<boolean> {
    const saved = await this.guard(() => this.ui.SaveSettings(next));
    if (saved) {
      // A shortcut refused at start is no longer the one saved.
      if (this.shortcut && saved.global_shortcut !== this.settings?.global_shortcut) this.shortcut.error = '';
      this.settings = saved;
    }
    return saved !== undefined;
  }

  async setAPIEnabled(on: boolean): Promise<void> {
    const state = await this.guard(() => this.ui.SetAPIEnabled(on));
    if (state) this.api = state;
  }

  async reloadModel(): Promise<void> {
    await this.guard(() => this.ui.ReloadModel());
  }

  /** Runs the GPU self-check again; the model reloads where it says. */
  async recheckGPU(): Promise<void> {
    await this.guard(() => this.ui.RecheckGPU());
  }

  /** 'copying' while the report is written, 'copied' once on the clipboard. */
  reportState: '' | 'copying' | 'copied' = $state('');

  /** Puts the report of `suzuran doctor --json` on the clipboard. */
  async copyReport(): Promise<void> {
    this.reportState = 'copying';
    const report = await this.guard(() => this.ui.Report());
    if (report === undefined) {
      this.reportState = '';
      return;
    }
    const copied = await this.guard(async () => {
      await navigator.clipboard.writeText(report);
      return true;
    });
    this.reportState = copied ? 'copied' : '';
  }

  /**
   * Counts the message events applied; messageEvents holds, by message id,
   * the count at the last one. A reload's answer was read before the events
   * that arrived while it travelled, so for a message with such an event the
   * window's copy is newer: a reply that ended meanwhile must not go back
   * to streaming, where no further event would ever end it.
   */
  private eventCount = 0;
  private messageEvents = new Map<number, number>();

  private async reloadCurrent(): Promise<void> {
    if (!this.current) return;
    const id = this.current.id;
    const asked = this.eventCount;
    await this.guard(async () => {
      const view = await this.ui.Conversation(id);
      if (this.current?.id !== id) return;
      this.messages = view.messages.map((loaded) => {
        const newer = (this.messageEvents.get(loaded.id) ?? 0) > asked;
        const mine = newer && this.messages.find((m) => m.id === loaded.id);
        // Its events do not carry its versions: those come from the reload.
        return mine ? { ...mine, versions: loaded.versions } : loaded;
      });
    });
  }

  private upsert(message: Message): void {
    const i = this.messages.findIndex((m) => m.id === message.id);
    // A reply's events do not repeat its versions; a new version is a
    // new message, which comes with a reload.
    if (i >= 0 && !message.versions && this.messages[i].versions) message = { ...message, versions: this.messages[i].versions };
    if (i >= 0) this.messages[i] = message;
    else {
      this.messages.push(message);
      this.messages.sort((a, b) => a.id - b.id);
    }
  }

  /**
   * Whether the window's link to the service is up. A browser loses it when
   * `suzuran serve` stops: the reply being written is marked interrupted
   * (as the server marks it when it starts again), and when the link is
   * back the model's state and the conversation are read again.
   */
  connected = $state(true);

  private onConnection(connected: boolean): void {
    this.connected = connected;
    if (!connected) {
      this.messages = this.messages.map((m) =>
        m.status === MessageStatus.Streaming ? { ...m, status: MessageStatus.Interrupted } : m,
      );
      this.prefill = null;
      return;
    }
    void this.guard(async () => {
      const state = await this.ui.State();
      this.model = state.model;
      this.api = state.api;
      this.settings = state.settings;
    });
  }

  /** Applies one event from the service. */
  handle(received: BackendEvent): void {
    if (received.type === 'resync') {
      void this.guard(() => this.refreshList());
      void this.reloadCurrent();
      return;
    }
    if (received.type === 'connection') {
      this.onConnection((received as { connected: boolean }).connected);
      return;
    }
    if (received.type === 'command') {
      const { command } = received as { command: string };
      if (command === 'new-chat') this.leave(() => this.newChat());
      else if (command === 'settings' && this.view !== 'settings') this.leave(() => (this.view = 'settings'));
      return;
    }
    const event = received as Event;
    if (this.attachments.handle(event)) return;
    switch (event.type) {
      case EventType.Model:
        this.model = event.model ?? this.model;
        return;
      case EventType.API:
        this.api = event.api ?? this.api;
        return;
      case EventType.Download:
        this.download = event.download ?? this.download;
        return;
      case EventType.Settings:
        if (event.settings) this.settings = event.settings;
        return;
      case EventType.Conversations:
        void this.guard(() => this.refreshList());
        return;
    }
    if (!this.current || event.conversationId !== this.current.id) return;
    if (event.messageId && (event.type === EventType.Message || event.type === EventType.Reply)) {
      this.messageEvents.set(event.messageId, ++this.eventCount);
    }
    switch (event.type) {
      case EventType.Prefill:
        this.prefill = {
          messageId: event.messageId ?? 0,
          tokens: event.promptTokens ?? 0,
          done: event.promptDone ?? 0,
        };
        return;
      case EventType.Message:
        if (event.message) {
          this.upsert(event.message);
          if (event.message.status !== MessageStatus.Streaming && this.prefill?.messageId === event.message.id) {
            this.prefill = null;
          }
        }
        return;
      case EventType.Reply: {
        const m = this.messages.find((x) => x.id === event.messageId);
        if (!m) return;
        if (this.prefill?.messageId === m.id) this.prefill = null;
        const okContent = append(m, 'content', event.content ?? '', event.contentAt ?? 0);
        const okReasoning = append(m, 'reasoning', event.reasoning ?? '', event.reasoningAt ?? 0);
        if (!okContent || !okReasoning) void this.reloadCurrent();
        return;
      }
    }
  }
}

/**
 * append adds text, which starts at offset at of the field, to the field:
 * what the message already has is skipped; a gap returns false.
 */
export function append(m: Message, field: 'content' | 'reasoning', text: string, at: number): boolean {
  if (!text) return true;
  const have = m[field].length;
  if (at > have) return false;
  if (at + text.length > have) m[field] += text.slice(have - at);
  return true;
}

/** Where a message stands among its versions: 1-based, and its neighbours' ids. */
export interface VersionNav {
  index: number;
  count: number;
  prev: number | null;
  next: number | null;
}

/** The version navigation of a message; null when it has only one version. */
export function versionNav(m: Message): VersionNav | null {
  const v = m.versions ?? [];
  const i = v.indexOf(m.id);
  if (v.length < 2 || i < 0) return null;
  return { index: i + 1, count: v.length, prev: i > 0 ? v[i - 1] : null, next: i < v.length - 1 ? v[i + 1] : null };
}

/** Saves a file in a browser: a download of its text. */
export function downloadFile(file: ExportFile): void {
  const url = URL.createObjectURL(new Blob([file.text], { type: file.mime }));
  const a = document.createElement('a');
  a.href = url;
  a.download = file.name;
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}

/** How long, said shortly: 850 ms, 3.2 s, 1 min 5 s. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const s = Math.round(ms / 1000);
  return `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** The thinking switch's position in a conversation: its own, else the app's. */
export function thinkOf(c: Conversation, app: boolean): boolean {
  if (c.settings?.thinking === 'on') return true;
  if (c.settings?.thinking === 'off') return false;
  return app;
}
