// The Go side as the chat window sees it: app/service's UI calls and its
// events, over one of two transports. In the desktop app Wails binds the
// service's UI object under window.go.service.UI and delivers events with
// its runtime; in a browser the same calls go to /api/call/<Method> and the
// events come as server-sent events from /api/events. The types and the
// method list are generated from the Go types (lib/gen/service.ts).

import { UIMethods, type Event, type UI } from './gen/service';

/**
 * An event from the service; 'resync' when events may have been missed (a
 * reconnect); 'connection' when the browser's link to the server is lost or
 * back; or a command from the desktop app's tray menu.
 */
export type BackendEvent =
  | Event
  | { type: 'resync' }
  | { type: 'connection'; connected: boolean }
  | { type: 'command'; command: 'new-chat' | 'settings' };

/** What a call says when the server cannot be reached at all. */
export const unreachableMessage =
  'Suzuran cannot be reached: its server stopped or the connection was lost. The window reconnects by itself when it is back.';

/** A connection to the service. */
export interface Backend {
  ui: UI;
  /** Calls handler for every event until the returned function is called. */
  onEvent(handler: (event: BackendEvent) => void): () => void;
}

/** The Wails event name the desktop app emits service events under. */
export const wailsEventName = 'suzuran:event';

interface WailsRuntime {
  EventsOn(name: string, callback: (...data: unknown[]) => void): () => void;
  BrowserOpenURL(url: string): void;
}

declare global {
  interface Window {
    go?: { service?: { UI?: UI } };
    runtime?: WailsRuntime;
  }
}

/** The desktop window's transport, or undefined outside the desktop app. */
export function wailsBackend(): Backend | undefined {
  const ui = window.go?.service?.UI;
  const runtime = window.runtime;
  if (!ui || !runtime) return undefined;
  return {
    ui,
    onEvent(handler) {
      return runtime.EventsOn(wailsEventName, (data) => handler(data as Event));
    },
  };
}

/** Raised by calls that the service answered with an error. */
export class CallError extends Error {}

/**
 * The message of a call's error: the service's is a string; the server in
 * front of it (a body too large, a key missing) answers in the API's shape,
 * {"message": …}.
 */
function errorText(error: string | { message?: string }, name: string, status: number): string {
  if (typeof error === 'string') return error;
  return error.message || `${name}: the app answered ${status}`;
}

/** The browser's transport: HTTP calls and server-sent events under base. */
export function httpBackend(base = ''): Backend {
  const ui = {} as Record<string, (...args: unknown[]) => Promise<unknown>>;
  for (const name of UIMethods) {
    ui[name] = async (...args: unknown[]) => {
      let response: Response;
      try {
        response = await fetch(`${base}/api/call/${name}`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify(args),
        });
      } catch {
        // fetch rejects only when no answer came at all ("Failed to fetch").
        throw new CallError(unreachableMessage);
      }
      let body: { result?: unknown; error?: string | { message?: string } };
      try {
        body = await response.json();
      } catch {
        throw new CallError(`${name}: the app answered ${response.status} without a readable body`);
      }
      if (body.error) throw new CallError(errorText(body.error, name, response.status));
      return body.result;
    };
  }
  return {
    ui: ui as unknown as UI,
    onEvent(handler) {
      let source: EventSource | undefined;
      let closed = false;
      let opened = false;
      let lost = false;
      const open = () => {
        source = new EventSource(`${base}/api/events`);
        source.onopen = () => {
          // After a reconnect, what happened meanwhile was missed.
          if (opened) {
            if (lost) handler({ type: 'connection', connected: true });
            handler({ type: 'resync' });
          }
          opened = true;
          lost = false;
        };
        source.onmessage = (message) => handler(JSON.parse(message.data) as Event);
        source.onerror = () => {
          if (!closed && opened && !lost) {
            lost = true;
            handler({ type: 'connection', connected: false });
          }
          // EventSource retries by itself unless the stream was closed
          // for good; then start again after a pause.
          if (!closed && source?.readyState === EventSource.CLOSED) setTimeout(open, 1000);
        };
      };
      open();
      return () => {
        closed = true;
        source?.close();
      };
    },
  };
}

/** The transport for where the page runs. */
export function connect(): Backend {
  return wailsBackend() ?? httpBackend();
}

/**
 * Opens a link in the user's browser. In the desktop window a link with
 * target=_blank goes nowhere by itself, so it is handed to Wails; returns
 * whether it was (the caller then cancels the click).
 */
export function openExternal(url: string): boolean {
  if (!window.runtime?.BrowserOpenURL) return false;
  window.runtime.BrowserOpenURL(url);
  return true;
}
