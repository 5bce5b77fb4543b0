// A Java MapReduce job made of its configuration alone, submitted the way Oozie's
// MapReduceMain submits a <map-reduce> action without <streaming>: every property (-D, from
// Pingo's job properties) into a JobConf, then Hadoop's JobClient, which runs the old
// "mapred" API unless mapred.mapper.new-api and mapred.reducer.new-api say otherwise. Unlike
// MapReduceMain it waits for the job and exits 1 when it fails. The job's jars come with
// -libjars. Used by tests/system/test_hadoop_real_mapreduce.py on the real mini cluster.
package pingo.test;

import org.apache.hadoop.conf.Configured;
import org.apache.hadoop.mapred.JobClient;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.RunningJob;
import org.apache.hadoop.util.Tool;
import org.apache.hadoop.util.ToolRunner;

public class JobConfMain extends Configured implements Tool {
    @Override
    public int run(String[] args) throws Exception {
        JobConf job = new JobConf(getConf());
        RunningJob done = JobClient.runJob(job);
        return done.isSuccessful() ? 0 : 1;
    }

    public static void main(String[] args) throws Exception {
        System.exit(ToolRunner.run(new JobConfMain(), args));
    }
}
