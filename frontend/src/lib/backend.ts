// The Go side as the chat window sees it. Wails binds the exported methods
// of app/gui.go's App struct under window.go.main.App and injects that object
// into the page; outside the desktop app (vite dev, tests) it is absent and
// these functions say so instead of failing.

/** The methods app/gui.go binds, with the types Wails gives them in JS. */
export interface AppBinding {
  Version(): Promise<string>;
}

declare global {
  interface Window {
    go?: { main?: { App?: AppBinding } };
  }
}

/** The bound App, or undefined when the page runs outside the desktop app. */
export function appBinding(): AppBinding | undefined {
  return window.go?.main?.App;
}

/** Suzuran's version from the Go side, or '' outside the desktop app. */
export async function appVersion(): Promise<string> {
  const app = appBinding();
  return app ? app.Version() : '';
}
