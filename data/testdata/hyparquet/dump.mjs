// Reads every parquet fixture with hyparquet, a JavaScript parquet reader
// that shares no code with parquet-go, and writes the rows it sees to
// ../parquet_rows_hyparquet.json. TestParquetRowsMatchHyparquet compares
// them with parquet-go's reading: two independent readers agree on every
// cell of the files data.WriteParquet made.
//
// Run from this folder:
//   npm install --no-save hyparquet@1.20.0 && node dump.mjs
import { parquetReadObjects } from 'hyparquet'
import { readFileSync, readdirSync, writeFileSync } from 'fs'

const dir = new URL('..', import.meta.url).pathname
const out = {}
for (const name of readdirSync(dir).filter(f => f.endsWith('.parquet')).sort()) {
  const buf = readFileSync(dir + name)
  const file = buf.buffer.slice(buf.byteOffset, buf.byteOffset + buf.byteLength)
  out[name] = await parquetReadObjects({ file })
}
// int64 columns come back as BigInt; JSON has no BigInt.
const json = JSON.stringify(out, (k, v) => typeof v === 'bigint' ? Number(v) : v, 1)
writeFileSync(dir + 'parquet_rows_hyparquet.json', json + '\n')
console.log('dumped', Object.keys(out).length, 'files')
